"""Two runs of one config on the CPU backend give the same numbers; another rollout seed does not; and
the first run's GRPO steps are real (gradients, DE-Venus metrics, parsed validation).

The second run uses verl's own agent-loop manager instead of the CPU backend's (which builds each agent
loop once per worker): the same numbers also show that the faster manager changes nothing but the time.
"""

import json
from pathlib import Path

import pytest

from devenus.runs.testbed import RunConfig, accuracy_by_split, run
from e2e import train, train_steps

pytestmark = [pytest.mark.verl, pytest.mark.slow, pytest.mark.extended]

# what a step's numbers depend on: the sampled responses, their rewards, the update they drive
STEP_KEYS = ("critic/score/mean", "critic/rewards/mean", "response_length/mean", "response_length/max",
             "actor/entropy", "actor/pg_loss", "actor/grad_norm")


def _cfg(val_file: Path, seed_overrides: tuple[str, ...] = ()) -> RunConfig:
    return RunConfig(steps=2, prompts_per_step=4, rollouts_per_prompt=4, val_n=2,
                     extra_overrides=(f"data.val_files=[{val_file}]", *seed_overrides))


def _dumps(out: Path) -> dict:
    return {p.stem: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted((out / "validation").glob("*.jsonl"))}


def _run(tb, out: Path, val_file: Path, seed_overrides: tuple[str, ...] = ()):
    r = train(tb, out, _cfg(val_file, seed_overrides), timeout=1200)
    assert r.ok, r.tail(60)
    metrics = train_steps(r)
    return r.output(), metrics, _dumps(out), accuracy_by_split(tb, r.validation)


def _run_recipe(tb, out: Path, val_file: Path):
    """The first run goes through the recipe API the demo uses (``devenus.runs.testbed.run``), whose
    reading is checked here too: every run costs a minute of verl start-up, so one run serves both purposes."""
    res = run(tb, out, _cfg(val_file), timeout_s=1200)
    log = res.output()
    assert res.ok, log[-4000:]
    metrics = {m["step"]: m for m in res.metrics if m["step"] > 0}
    return log, metrics, _dumps(out), res, accuracy_by_split(tb, res.validation)


def _check_grpo_steps(res, accuracy, rows_per_step: int, val_questions: int) -> None:
    """Real GRPO steps: gradient flows where a group has reward variance, DE-Venus metrics are logged,
    validation before training and after the last step is parsed."""
    train = [m for m in res.metrics if "actor/grad_norm" in m]
    assert [m["step"] for m in train] == [1, 2]
    assert max(m["actor/grad_norm"] for m in train) > 0
    # a step whose groups are all-right or all-wrong has zero advantages and a zero gradient
    for m in train:
        assert (m["actor/grad_norm"] > 0) == (m["critic/advantages/max"] > 0)
        assert m["devenus/reward/labeled/rows"] == rows_per_step
        assert 0.0 <= m["devenus/reward/labeled/mean"] <= 1.0
        assert m["devenus/timing_s/hooks"] >= 0
    assert sorted(res.validation) == sorted(accuracy) == [0, 2]
    assert accuracy[0]["ID"]["n"] + accuracy[0].get("OOD", {"n": 0})["n"] == val_questions


def test_same_config_same_numbers(base_testbed, tmp_path):
    from devenus.records import read_records, write_records

    val_file = tmp_path / "val.parquet"  # 24 held-out questions: validation stays cheap
    write_records(read_records(base_testbed.split("test_id"))[:24], val_file)

    log1, m1, d1, res1, acc1 = _run_recipe(base_testbed, tmp_path / "a", val_file)
    _, m2, d2, acc2 = _run(base_testbed, tmp_path / "b", val_file,
                           ("++actor_rollout_ref.rollout.agent.agent_loop_manager_class=null",))
    assert "backend cpu (auto: no accelerator visible to torch" in log1
    _check_grpo_steps(res1, acc1, rows_per_step=16, val_questions=24)
    assert set(m1) == set(m2) == {1, 2}
    for step in (1, 2):
        for key in STEP_KEYS:
            assert m1[step][key] == m2[step][key], (step, key, m1[step][key], m2[step][key])
    assert set(d1) == set(d2) == {"0", "2"}  # validation before training and after step 2
    for step in d1:
        assert [(e["output"], e["score"]) for e in d1[step]] == [(e["output"], e["score"]) for e in d2[step]]
    assert acc1 == acc2

    # the same config with another rollout seed samples other responses (the comparison above can fail)
    _, m3, d3, _ = _run(base_testbed, tmp_path / "c", val_file, ("actor_rollout_ref.rollout.seed=1",))
    assert [e["output"] for e in d3["0"]] != [e["output"] for e in d1["0"]]
    assert any(m3[s][k] != m1[s][k] for s in (1, 2) for k in STEP_KEYS)
