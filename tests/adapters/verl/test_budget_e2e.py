"""The rollout budget end to end through ``python -m devenus.train`` on the testbed: GRPO, 4 prompts x 2
rollouts a step (8 rollouts), validation every 2 steps on 16 ID questions, a budget of 20 rollouts and a cap
of 8 steps. The count reaches 24 at step 3, not a validation step, so the run stops after step 4's
validation (32 rollouts): verl logged step 4 with its validation and the budget's metrics, and no step 5 ran."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

from devenus.runs.testbed import RunConfig  # noqa: E402
from e2e import train, train_steps  # noqa: E402

PROMPTS, N, BUDGET, TEST_FREQ, CAP = 4, 2, 20, 2, 8


@pytest.fixture(scope="module")
def small_val(base_testbed, tmp_path_factory):
    from devenus.records import read_records, write_records

    return str(write_records(read_records(base_testbed.split("test_id"))[:16],
                             tmp_path_factory.mktemp("budget_val") / "val.parquet"))


@pytest.mark.slow
def test_a_run_stops_at_the_first_validation_step_after_its_budget(base_testbed, small_val, tmp_path):
    cfg = RunConfig(method="grpo", steps=CAP, prompts_per_step=PROMPTS, rollouts_per_prompt=N, val_n=1,
                    val_files=(small_val,), val_before_train=False,
                    extra_overrides=(f"trainer.test_freq={TEST_FREQ}", f"+devenus.budget.rollouts={BUDGET}"))
    r = train(base_testbed, tmp_path, cfg, timeout=900)
    assert r.returncode == 0, r.tail(40)
    steps = train_steps(r)
    assert sorted(steps) == [1, 2, 3, 4], f"stopped after step {max(steps)}, not 4"
    assert [steps[s]["devenus/budget/rollouts"] for s in (1, 2, 3, 4)] == [8, 16, 24, 32]
    assert [s for s, m in steps.items() if "devenus/budget/stop_step" in m] == [4]
    assert steps[4]["devenus/budget/stop_step"] == 4 and steps[4]["devenus/budget/stop_rollouts"] == 32
    assert sorted(r.validation) == [2, 4], "the stop step has its validation"
    assert any(k.startswith("val-") for k in steps[4]), "verl logged step 4's validation with its metrics"
    assert all(m["devenus/timing_s/generation"] > 0 for m in steps.values())
    assert "stopped for the rollout budget at step 4" in r.tail(200)
