"""The OLR reference's active noise in verl's real step: rows marked ``redraw`` get a wrong answer of the
step's own rollouts as their target at every visit (``devenus/noise/*``), and verl trains on its rewards.
One small run (8 rows, all noisy, 4 prompts x 4 rollouts, 2 steps), extended: the default suite shows the
same through the experiment runner's arm (tests/experiments/test_runner_e2e.py), one launch fewer."""

from __future__ import annotations

import pytest

from devenus.runs.testbed import RunConfig
from e2e import train, train_steps


@pytest.mark.slow
@pytest.mark.extended  # the runner's e2e arm trains on redrawn noise in the default suite
def test_redrawn_noise_reaches_verls_rewards(base_testbed, tmp_path):
    from devenus.records.io import read_records
    from devenus.records.versions import write_version
    from devenus.testbed.noise import inject_noise

    rows = read_records(base_testbed.split("train"))[:8]
    write_version(inject_noise(rows, 1.0, "redraw", 0), tmp_path / "redraw.parquet", rule="test")
    cfg = RunConfig(method="grpo", steps=2, prompts_per_step=4, rollouts_per_prompt=4, save_freq=-1,
                    train_file=str(tmp_path / "redraw.parquet"), val_before_train=False,
                    extra_overrides=("trainer.test_freq=-1",))
    r = train(base_testbed, tmp_path / "run", cfg)
    assert r.ok, r.tail(60)
    steps = train_steps(r)
    assert sorted(steps) == [1, 2]
    for m in steps.values():
        # every group is noisy: each one is redrawn, or keeps the sentinel when its rollouts have no wrong answer
        assert m["devenus/noise/redrawn"] + m["devenus/noise/no_wrong_answer"] == 4
    redrawn = sum(m["devenus/noise/redrawn"] for m in steps.values())
    assert redrawn >= 1
    # the sentinel alone scores 0 everywhere; a drawn wrong answer is one some rollout gave, so it scores
    assert sum(m["critic/score/mean"] for m in steps.values()) > 0
