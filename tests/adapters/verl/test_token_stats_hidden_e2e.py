"""GeoMin end to end: ``python -m devenus.train`` on the CPU testbed, 2 steps of 4 prompts x 4 rollouts and a
tiny validation after the last step. The pooled hidden states come from the actor's log-prob pass in the Ray
worker (the engine extension, loaded through DE-Venus's ``verl.plugins`` entry point), and the method's
metrics (layer choice, AUROCs, mixture) land in verl's step metrics.

Semi-supervised data (half the labels kept); thresholds are loosened so that the method acts on 16 rollouts.
"""

from __future__ import annotations

import math
import time

import pytest

from devenus.recipes.testbed_train import RunConfig, parse_console_metrics
from e2e import run_train, train_cmd


@pytest.fixture(scope="module")
def semi_file(base_testbed, tmp_path_factory):
    from devenus.records import hide_labels, read_records, write_records

    rows = hide_labels(read_records(base_testbed.split("train"))[:16], labeled_fraction=0.5, seed=0)
    return str(write_records(rows, tmp_path_factory.mktemp("geomin") / "semi.parquet"))


@pytest.mark.slow
def test_geomin_two_steps_through_devenus_train(base_testbed, semi_file, tmp_path, record_property):
    cfg = RunConfig(method="geomin", steps=2, prompts_per_step=4, rollouts_per_prompt=4, train_file=semi_file,
                    val_before_train=False,
                    extra_overrides=("trainer.test_freq=2", "data.val_max_samples=4"))
    t0 = time.perf_counter()
    r = run_train(train_cmd(base_testbed, tmp_path, cfg, "+devenus.method_config.min_per_class=2",
                            "+devenus.method_config.min_mixture_points=2", "+devenus.method_config.top_layers=2"),
                  timeout=900)
    record_property("wall_s", time.perf_counter() - t0)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    steps = {m["step"]: m for m in parse_console_metrics(r.stdout.splitlines())}
    assert set(steps) == {1, 2}
    for s, m in sorted(steps.items()):  # shown with -s
        print(s, {k: v for k, v in m.items() if k.startswith("devenus/geomin/") or k.startswith("val-core")})
    for s, m in steps.items():
        assert m["devenus/geomin/layers_total"] == 5  # the testbed model: embeddings + 3 layers + final norm
        assert "devenus/geomin/admitted_share/unlabeled" in m
    acted = [m for m in steps.values() if "devenus/geomin/auroc/chosen" in m]
    # whether a step has >= 2 correct and >= 2 incorrect labeled rollouts depends on the sampled answers;
    # when one does, its fits, layer choice and (with an unlabeled majority) mixture reach the step metrics
    for m in acted:
        assert 0 <= m["devenus/geomin/layer/chosen"] < 5 and math.isfinite(m["devenus/geomin/kappa/correct"])
        assert 0.0 <= m["devenus/geomin/auroc/worst"] <= m["devenus/geomin/auroc/best"] <= 1.0
    record_property("acted_steps", len(acted))
    assert any(k.startswith("val-core/") for k in steps[2]), sorted(steps[2])
