"""experiments/power.py on the committed results: the runner's pairing, the SD it recovers, the budget."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import scipy.stats as scipy_stats

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("power", ROOT / "experiments" / "power.py")
power = importlib.util.module_from_spec(spec)
sys.modules["power"] = power  # dataclasses look their module up there
spec.loader.exec_module(power)


def test_sd_from_the_runner_pairing_equals_the_sd_of_the_per_seed_differences():
    import json

    d = []
    for s in (0, 1, 2):
        a = json.loads((power.RESULTS / "selection" / f"ttrl_routed_s{s}.json").read_text())["accuracy"]["ID"]
        b = json.loads((power.RESULTS / "selection" / f"grpo_full_s{s}.json").read_text())["accuracy"]["ID"]
        d.append(a - b)
    sd, n, mean = power.paired_sd("selection", "ttrl_routed", "grpo_full")
    assert n == 3 and mean == pytest.approx(sum(d) / 3) and sd == pytest.approx(scipy_stats.tstd(d))


def test_mixed_weights_pair_only_same_weights_seeds():
    # label_noise: the grpo arms' seed 0 ran on other weights than base's seed 0 -> vs base pairs 2 seeds
    sd, n, _ = power.paired_sd("label_noise", "grpo@active0.5", "base")
    assert n == 2 and not math.isnan(sd)


def test_pooled_sd_and_detectable_effect():
    assert power.pooled_sd([(0.1, 3), (0.2, 3), (float("nan"), 1)]) == pytest.approx(math.sqrt((0.01 + 0.04) / 2))
    # with the detectable effect as the true one, the power is 0.8
    from devenus.experiments.stats import power_difference

    e = power.detectable(0.02, 5)
    assert power_difference(5, 0.02, e) == pytest.approx(0.8, abs=1e-6)


def test_every_plan_has_a_file_and_the_plans_fit_the_ceiling():
    total = {False: 0.0, True: 0.0}
    for name, plan in power.PLANS.items():
        assert (ROOT / "experiments" / "plans" / f"{name}.md").is_file(), name
        total[plan.confirmatory] += power.analyse(plan)["wall_min"]
    assert total[False] <= power.CEILING_MIN and total[True] <= power.FOLLOW_UP_CEILING_MIN


def test_claims_table_decides_the_committed_results_with_the_plans_sides(monkeypatch):
    import dataclasses

    # the old designs' committed results (a plan's own runs, once committed, replace its rows)
    monkeypatch.setattr(power, "PLANS", {k: dataclasses.replace(p, run=None) for k, p in power.PLANS.items()})
    # keyed by (plan, claim): a replication tests its pilot's claim again
    rows = {(line.split(" | ")[0][2:], line.split(" | ")[2]): line for line in power.claims_table().splitlines()[2:]}
    assert "reproduced" in rows[("label_free", "ttrl@0 vs grpo_full, -")]  # -0.130 ± 0.101: the label-free claim holds
    assert "wrong side" in rows[("selection", "ttrl_routed vs grpo_full, +")]  # -0.041 ± 0.021 against a "≥" claim
    assert "inconclusive" in rows[("ten_percent_labels", "trapo@10 vs grpo_full, =")]  # ± 0.235: neither a difference nor a null
    assert all(len(p.sides) == len(p.claims) for p in power.PLANS.values())


def test_a_plan_run_under_its_design_is_decided_on_its_own_results(tmp_path, monkeypatch):
    import json

    # hand-built results of a plan's own experiment: olr beats grpo by 0.05 +- 0.01 at inactive 0.9 in 3 seeds,
    # the other claims have no paired seeds (not run) and stay out of the Holm family
    (tmp_path / "label_noise_rho").mkdir()
    mech = {"devenus/mechanism/correction/precision": {"value": 0.8, "num": 8, "den": 10}}
    for seed, (g, o) in enumerate([(0.40, 0.45), (0.42, 0.46), (0.41, 0.47)]):
        for arm, acc, m in (("grpo@inactive0.9", g, {}), ("olr@inactive0.9", o, mech)):
            rec = {"experiment": "label_noise_rho", "name": arm, "seed": seed, "returncode": 0, "base_model": "w",
                   "per_question": {"ID": {"q": acc}}, "accuracy": {"ID": acc},
                   "wall_s": 60.0, "arm": {"method": arm.split("@")[0]}, "mechanism": m}
            (tmp_path / "label_noise_rho" / f"{arm}_s{seed}.json").write_text(json.dumps(rec))
    monkeypatch.setattr(power, "RESULTS", tmp_path)
    rows = power.plan_rows(power.PLANS["label_noise_rho"])
    assert len(rows) == 4
    assert rows[0].startswith(f"| label_noise_rho | {power.PLANS['label_noise_rho'].paper} | olr@inactive0.9 vs grpo@inactive0.9, + | correction/precision "
                              "0.80-0.80 (24/30) | +0.050 ± ")
    assert "| reproduced (plan design) | 6 runs, 6 min |" in rows[0]
    assert all("| 0 paired seed(s) | not run under the plan | - |" in r for r in rows[1:])
