"""The rollout-budget experiment (no training): its definition (arms, budget, pool, claims as the plan and
experiments/power.py state them, overrides that pass the trainer's preflight) and its report on hand-built
records whose crossings are known."""

import dataclasses
import math

import pytest

from devenus.experiments.curves import ROLLOUTS, ZERO_VARIANCE
from devenus.online.sampling.dynamic_sampling import GENERATION_S


@pytest.fixture()
def rb():
    from devenus.experiments.definitions import rollout_budget

    return rollout_budget


def record(name, seed, per_step, val, seconds=1.0, weights="w1", stop=True, extra=None):
    """A runner record: steps 1..N of ``per_step`` rollouts (``seconds`` of generation each), validation
    points {step: ID accuracy}, the budget's stop logged at the last step."""
    curves = [{"step": i + 1, ROLLOUTS: n, GENERATION_S: seconds, **(extra or {})} for i, n in enumerate(per_step)]
    if stop:
        curves[-1]["devenus/budget/stop_step"] = float(len(per_step))
    return {"name": name, "seed": seed, "base_model": weights, "returncode": 0, "curves": curves,
            "val_curve": [{"step": s, "ID": a} for s, a in val.items()], "accuracy": {"ID": val[max(val)]}}


def base(seed, acc=0.30, weights="w1"):
    return {"name": "base", "seed": seed, "base_model": weights, "returncode": 0, "curves": [],
            "val_curve": [{"step": 0, "ID": acc}], "accuracy": {"ID": acc}}


def records():
    """Two seeds. grpo: 128 a step, (0, .30) (512, .42) (1024, .50): 0.40 at 426.67, 0.55 never.
    grpo+ds seed 0: 256 a step, (0, .30) (512, .45) (1024, .56): 0.40 at 341.33 (ratio 0.8), 0.55 at 977.45
    (grpo never: ratio < 977.45 / 1024); seed 1: grpo's curve (ratio 1.0 at 0.40, 0.55 neither)."""
    out = {}
    for seed in (0, 1):
        out[("base", seed)] = base(seed)
        out[("grpo", seed)] = record("grpo", seed, [128] * 8, {4: 0.42, 8: 0.50}, seconds=1.0)
    out[("grpo+ds", 0)] = record("grpo+ds", 0, [256] * 4, {2: 0.45, 4: 0.56}, seconds=2.0)
    out[("grpo+ds", 1)] = record("grpo+ds", 1, [128] * 8, {4: 0.42, 8: 0.50}, seconds=2.0)
    return out


# ------------------------------------------------------------------------------ the definition
def test_arms_budget_pool_and_validation_are_the_plans(rb):
    d = rb.DEFINITION
    assert [a.name for a in d.arms] == ["grpo", "grpo+ds", "grpo+skip", "grpo+ds+skip"]
    assert {a.name: a.baseline for a in d.arms} == {"grpo": "base", "grpo+ds": "grpo", "grpo+skip": "grpo",
                                                     "grpo+ds+skip": "grpo+ds"}
    assert all(a.claimed_side == 0 for a in d.arms[1:]) and all(a.method == "grpo" for a in d.arms)
    assert rb.ROLLOUTS == 4096 == 32 * d.budget.prompts_per_step * d.budget.rollouts_per_prompt
    assert d.budget.steps == rb.STEP_CAP == 64 and d.budget.val_n == 2 and d.seeds == (0, 1, 2)
    assert (d.budget.prompts_per_step, d.budget.rollouts_per_prompt, d.budget.lr, d.budget.kl_coef) == (16, 8, 5e-5, 0.01)
    assert rb.POOL == 128 and rb.LEVELS == (0.40, 0.45, 0.50, 0.55) and rb.MARGIN == 0.03
    for a in d.arms:
        assert "trainer.test_freq=4" in a.overrides and "+devenus.budget.rollouts=4096" in a.overrides
        assert any("dynamic_sampling.enabled=true" in o for o in a.overrides) == ("ds" in a.name)
        assert any("skip.enabled=true" in o for o in a.overrides) == ("skip" in a.name)
    # the pool is the stratified one other plans use (its writer's stem)
    assert rb._pool.__qualname__.startswith("_pool_file")


def test_the_claims_are_the_plans_in_power_py_and_the_runners_baselines(rb):
    import importlib.util
    import sys
    from pathlib import Path

    power = sys.modules.get("power")
    if power is None:  # as tests/experiments/test_power.py loads it (dataclasses look their module up there)
        spec = importlib.util.spec_from_file_location("power", Path(__file__).resolve().parents[2] / "experiments" / "power.py")
        power = sys.modules["power"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(power)
    plan = power.PLANS["rollout_savings"]
    assert plan.run == "rollout_budget" and plan.run_claims == rb.CLAIMS
    assert sorted((a, r) for a, r, _ in rb.CLAIMS) == sorted((a, r) for (a, r) in plan.claims)
    assert {(a.name, a.baseline, a.claimed_side) for a in rb.DEFINITION.arms if a.baseline != "base"} == set(rb.CLAIMS)


def test_every_arms_run_passes_the_trainers_preflight(rb, tmp_path):
    """Each arm's command line (the runner's overrides on the testbed recipe; the train split standing in
    for the pool, whose pass rates take minutes) passes devenus.train's checks before Ray starts, and the
    overlay reads its budget, test_freq and switches."""
    pytest.importorskip("verl")
    from devenus.adapters.verl.cpu.launch import cpu_overrides
    from devenus.adapters.verl.train import check_overlay, preflight
    from devenus.runs.testbed import overrides
    from devenus.testbed import build_testbed

    tb = build_testbed()
    d = dataclasses.replace(rb.DEFINITION, train_file=None)
    exp = d.experiment(tmp_path / "results" / rb.NAME, tmp_path / "work")
    for a in d.arms:
        out = exp.run_dir(a.name, 0)
        cfg = preflight([*cpu_overrides(), *overrides(tb, out, exp.run_config(a, 0, out, ("devenus.backend=cpu",)))])
        overlay = check_overlay(cfg)
        assert overlay.budget.rollouts == 4096 and cfg.trainer.test_freq == 4 and cfg.trainer.total_training_steps == 64
        assert overlay.dynamic_sampling.enabled == ("ds" in a.name) and overlay.skip.enabled == ("skip" in a.name)


# ------------------------------------------------------------------------------ the report
def test_rollouts_to_reach_ratios_and_bounds_on_known_crossings(rb):
    table, notes = rb.reach(records(), pairs=(("grpo+ds", "grpo"),), levels=(0.40, 0.55))
    assert notes == []
    at40, at55 = table["grpo+ds vs grpo"]["0.4"], table["grpo+ds vs grpo"]["0.55"]
    s0, s1 = at40["seeds"][0], at40["seeds"][1]
    assert s0["arm"] == pytest.approx(1024 / 3) and s0["ref"] == pytest.approx(1280 / 3)
    assert s0["ratio"] == pytest.approx(0.8) and s1["ratio"] == pytest.approx(1.0)
    assert at40["ratio"]["mean"] == pytest.approx(0.9) and at40["ratio"]["n"] == 2
    assert at40["ratio"]["half_width"] > 0
    # 0.55: seed 0's arm reaches it (977.45), grpo never: an upper bound; seed 1 neither: no interval
    assert at55["seeds"][0]["arm"] == pytest.approx(512 + 0.10 / 0.11 * 512) and at55["seeds"][0]["ref"] is None
    assert at55["seeds"][0]["bound"] == f"<{(512 + 0.10 / 0.11 * 512) / 1024:.2f}"
    assert at55["seeds"][1]["bound"] == "neither reached" and "ratio" not in at55


def test_ratio_bounds():
    from devenus.experiments.definitions.rollout_budget import ratio

    assert ratio(300.0, 600.0, 1000, 1000) == {"ratio": 0.5, "bound": None}
    assert ratio(None, 500.0, 2000, 1000) == {"ratio": None, "bound": ">4.00"}  # the arm never: > its total / ref's
    assert ratio(800.0, None, 1000, 1600) == {"ratio": None, "bound": "<0.50"}
    assert ratio(0.0, 0.0, 1000, 1000)["bound"] == "both at the start"


def test_wall_clock_reads_generation_seconds(rb):
    recs = records()
    recs = {("grpo+ds+skip" if k[0] == "grpo+ds" else "grpo+ds" if k[0] == "grpo" else k[0], k[1]): v
            for k, v in recs.items()}
    table, _ = rb.reach(recs, rb.WALL_CLOCK, levels=(0.40,), key=GENERATION_S)
    s0 = table["grpo+ds+skip vs grpo+ds"]["0.4"]["seeds"][0]
    # grpo+ds+skip (seed 0): 2 s a step, (0, .30) (4, .45): 0.40 at 2.67 s; grpo+ds: 1 s a step, (4, .42): 3.33 s
    assert s0["arm"] == pytest.approx(8 / 3) and s0["ref"] == pytest.approx(10 / 3) and s0["ratio"] == pytest.approx(0.8)


def test_the_report_text_holds_the_stops_claims_pool_and_mechanism(rb):
    recs = records()
    for seed in (0, 1):
        audit = {"devenus/skip/audited": 4, "devenus/skip/audited_zero_variance": 3, ZERO_VARIANCE: 0.25}
        recs[("grpo+skip", seed)] = record("grpo+skip", seed, [128] * 8, {4: 0.41, 8: 0.49}, extra=audit)
    recs[("grpo+ds", 1)]["curves"][-1].pop("devenus/budget/stop_step")  # ran to the cap
    text, numbers = rb.report_numbers(recs, {"0": {"zero_variance_share": 0.125}, "1": {"zero_variance_share": 0.0}})
    assert "| grpo+ds | 2 | 4 / 1024*, 8 / 1024 |" in text
    assert "| grpo+ds vs grpo | 0.4 | 2 | 341 / 427, 427 / 427 | 0.80, 1.00 |" in text
    assert "seed 0: 0.125, seed 1: 0.000" in text
    assert "- grpo+skip: seed 0: 0.75 (24/32), seed 1: 0.75 (24/32)" in text
    assert numbers["zero_variance"]["grpo+skip"]["seeds"][0]["share"] == pytest.approx(0.25)
    claims = {c["claim"]: c for c in numbers["claims"]}
    assert claims["grpo+ds vs grpo"]["mean"] == pytest.approx(0.03) and len(claims["grpo+ds vs grpo"]["seeds"]) == 2
    assert claims["grpo+skip vs grpo"]["mean"] == pytest.approx(-0.01)
    assert claims["grpo+skip vs grpo"]["sd"] == 0 and claims["grpo+skip vs grpo"]["verdict"] == "reproduced"  # |-0.01| < 0.03, no noise
    assert claims["grpo+ds+skip vs grpo+ds"]["verdict"] == "not run"
    assert "| grpo+ds+skip vs grpo+ds | 0 | - | - | not run |" in text


def test_write_report_draws_accuracy_against_rollouts_with_the_levels(rb, tmp_path, monkeypatch):
    import devenus.experiments.plot as plot

    exp = rb.DEFINITION.experiment(tmp_path / "results" / rb.NAME, tmp_path / "work",
                                   validation={"test_id": tmp_path / "v.parquet"})
    exp.log = lambda s: None
    code = {"commit": None, "dirty": None, "version": "0.1.0", "tree": "tree-a"}
    for (name, seed), r in records().items():
        exp._save(name, seed, {**r, "experiment": rb.NAME, "fingerprint": exp.fingerprint(exp.arm(name)), "code": code,
                               "per_question": {"ID": {"q": r["accuracy"]["ID"]}}, "wall_s": 1.0, "startup_s": None,
                               "val_samples": 2})
    drawn = {}
    monkeypatch.setattr(plot, "plot_curves", lambda name, panels, out, targets=None, levels=(): drawn.update(
        panels=panels, levels=levels))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    text = rb.DEFINITION.write_report(exp)
    assert "Rollouts to reach each level" in text and (tmp_path / "results" / f"{rb.NAME}_curves.md").exists()
    (panel,) = drawn["panels"].values()
    assert sorted(panel) == ["grpo", "grpo+ds"] and len(panel["grpo"]) == 2
    assert panel["grpo+ds"][0] == [(0.0, 0.30), (512.0, 0.45), (1024.0, 0.56)]
    assert drawn["levels"] == rb.LEVELS and not math.isnan(panel["grpo"][0][-1][1])
