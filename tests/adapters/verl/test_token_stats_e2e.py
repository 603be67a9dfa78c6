"""Intuitor and EMRL end to end: ``python -m devenus.train`` on the CPU testbed, 2 steps each.

Semi-supervised data (a quarter of the labels kept); the engine extension is loaded in every Ray process
through DE-Venus's ``verl.plugins`` entry point.
"""

import math

import pytest

from devenus.runs.testbed import RunConfig
from e2e import train, train_steps


@pytest.fixture(scope="module")
def semi_supervised_file(base_testbed, tmp_path_factory):
    from devenus.records import hide_labels, read_records, write_records

    rows = hide_labels(read_records(base_testbed.split("train"))[:64], labeled_fraction=0.25, seed=0)
    return str(write_records(rows, tmp_path_factory.mktemp("semi") / "semi.parquet"))


@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.parametrize(
    "method, extra, score",
    [
        ("intuitor", [], "self_certainty"),
        ("emrl", ["+devenus.method_config.variant=trajectory"], "mean_logp"),
    ],
)
def test_two_steps_through_devenus_train(base_testbed, semi_supervised_file, tmp_path, method, extra, score):
    cfg = RunConfig(method=method, steps=2, prompts_per_step=4, rollouts_per_prompt=4, train_file=semi_supervised_file,
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    r = train(base_testbed, tmp_path, cfg, *extra, timeout=900)
    assert r.ok, r.tail(60)
    steps = train_steps(r)
    assert set(steps) == {1, 2}
    for s, m in sorted(steps.items()):  # shown with -s
        print(s, {k: v for k, v in m.items() if k.startswith(f"devenus/{method}/") or k in (
            "actor/grad_norm", "timing_s/old_log_prob", "devenus/reward/unlabeled/mean", "devenus/reward/labeled/mean")})
    for s, m in steps.items():
        assert math.isfinite(m["actor/grad_norm"]), (s, m["actor/grad_norm"])
        if "devenus/reward/unlabeled/rows" not in m:
            continue  # a step whose prompts all happen to be labeled constructs nothing
        for key in (f"{score}/mean", f"{score}/std", "collapse_warning", "response_length/mean"):
            assert f"devenus/{method}/{key}" in m, (s, sorted(k for k in m if k.startswith("devenus/")))
        assert math.isfinite(m[f"devenus/{method}/{score}/mean"])
        # the constructed rewards are what the update saw (no KL in the reward here)
        assert m["devenus/reward/unlabeled/mean"] == pytest.approx(m[f"devenus/{method}/{score}/mean"], abs=1e-4)
    assert any(f"devenus/{method}/{score}/mean" in m for m in steps.values())
