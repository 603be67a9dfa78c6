"""The rollout-savings experiment (no training): the curve arithmetic (cumulative rollouts from per-step
metrics, rollouts to reach an accuracy with interpolation, paired savings over seeds) on hand-built
records, and the experiment's arms: each builds its method, names its reference, and its overrides
compose into the typed devenus overlay."""

import math

import pytest

from devenus.experiments.curves import (ROLLOUTS, ZERO_VARIANCE, accuracy_at, accuracy_curve, cumulative_rollouts,
                                        rollouts_to_reach, savings, zero_variance_floor)
from devenus.experiments.stats import t_ppf

@pytest.fixture()
def rs():
    from devenus.experiments.definitions import rollout_savings

    return rollout_savings


# ------------------------------------------------------------------------------ the arithmetic
def test_cumulative_rollouts_sum_the_per_step_metric():
    curves = [{"step": 2, ROLLOUTS: 256}, {"step": 1, ROLLOUTS: 128}, {"step": 3, ROLLOUTS: 200.0}]
    assert cumulative_rollouts(curves) == {1: 128, 2: 384, 3: 584}


def test_cumulative_rollouts_refuse_gaps_repeats_and_a_missing_metric():
    with pytest.raises(ValueError, match="steps 1..N"):
        cumulative_rollouts([{"step": 1, ROLLOUTS: 1}, {"step": 3, ROLLOUTS: 1}])
    with pytest.raises(ValueError, match="twice"):
        cumulative_rollouts([{"step": 1, ROLLOUTS: 1}, {"step": 1, ROLLOUTS: 1}])
    with pytest.raises(KeyError, match="step 2: no 'devenus/rollouts/generated'"):
        cumulative_rollouts([{"step": 1, ROLLOUTS: 1}, {"step": 2, "other": 1}])


def test_rollouts_to_reach_interpolates_the_first_crossing():
    pts = [(0.0, 0.25), (100.0, 0.35), (200.0, 0.55), (300.0, 0.50), (400.0, 0.60)]
    assert rollouts_to_reach(pts, 0.45) == pytest.approx(150.0)  # halfway from 0.35 to 0.55
    assert rollouts_to_reach(pts, 0.55) == pytest.approx(200.0)  # reached exactly at a point
    assert rollouts_to_reach(pts, 0.58) == pytest.approx(300 + 0.08 / 0.10 * 100)  # after the dip
    assert rollouts_to_reach(pts, 0.20) == 0.0
    assert rollouts_to_reach(pts, 0.61) is None


def test_accuracy_at_interpolates_inside_the_curve_only():
    pts = [(0.0, 0.2), (100.0, 0.4), (300.0, 0.8)]
    assert accuracy_at(pts, 50) == pytest.approx(0.3)
    assert accuracy_at(pts, 200) == pytest.approx(0.6)
    assert accuracy_at(pts, 300) == pytest.approx(0.8)
    assert accuracy_at(pts, 301) is None


def record(name, seed, per_step, val, weights="w1"):
    """A runner record: per-step rollouts (steps 1..N) and validation points {step: ID accuracy}."""
    return {"name": name, "seed": seed, "base_model": weights, "returncode": 0,
            "curves": [{"step": i + 1, ROLLOUTS: n} for i, n in enumerate(per_step)],
            "val_curve": [{"step": s, "ID": a} for s, a in val.items()], "accuracy": {"ID": val[max(val)]}}


def base(seed, acc=0.25, weights="w1"):
    return {"name": "base", "seed": seed, "base_model": weights, "accuracy": {"ID": acc}, "val_curve": [{"step": 0, "ID": acc}]}


def test_accuracy_curve_starts_at_the_base_and_places_validation_points_at_cumulative_rollouts():
    r = record("grpo", 0, [100, 100, 150, 150], {2: 0.4, 4: 0.5})
    assert accuracy_curve(r, base(0)) == [(0.0, 0.25), (200.0, 0.4), (500.0, 0.5)]
    assert accuracy_curve(r) == [(200.0, 0.4), (500.0, 0.5)]
    with pytest.raises(ValueError, match="step 6"):
        accuracy_curve(record("grpo", 0, [1, 1], {6: 0.4}))


def test_savings_pairs_each_seed_with_its_reference_and_gives_an_interval_over_seeds():
    recs = {}
    for seed, (grpo_final, ds_mid) in enumerate([(0.5, 0.55), (0.6, 0.6), (0.4, 0.5)]):
        recs[("base", seed)] = base(seed, 0.2)
        recs[("grpo", seed)] = record("grpo", seed, [100] * 4, {2: 0.3, 4: grpo_final})   # 400 rollouts
        recs[("ds", seed)] = record("ds", seed, [200] * 4, {1: 0.2, 2: ds_mid, 4: 0.7})   # 800 rollouts
    s = savings(recs, "ds", "grpo", goal=0.6)
    # seed 0: target 0.5; ds is at 0.2 at 200, 0.55 at 400: crossing at 200 + 0.3/0.35*200
    r0 = (200 + 0.3 / 0.35 * 200) / 400
    r1 = 400 / 400  # reaches 0.6 exactly at its 400-rollout point
    r2 = (200 + 0.2 / 0.3 * 200) / 400
    assert [s["seeds"][k]["ratio"] for k in (0, 1, 2)] == pytest.approx([r0, r1, r2])
    mean = (r0 + r1 + r2) / 3
    sd = math.sqrt(sum((r - mean) ** 2 for r in (r0, r1, r2)) / 2)
    assert s["ratio"]["mean"] == pytest.approx(mean)
    assert s["ratio"]["half_width"] == pytest.approx(t_ppf(0.975, 2) * sd / math.sqrt(3))
    assert s["verdict"] in ("inconclusive", "excludes 0 (other side)", "excludes 0 (claimed side)")
    # accuracy at 0.6 x 400 = 240 rollouts: between ds's (200, 0.2) and (400, mid) points
    deltas = [0.2 + 40 / 200 * (mid - 0.2) - tgt for tgt, mid in [(0.5, 0.55), (0.6, 0.6), (0.4, 0.5)]]
    assert s["delta_at_goal"]["mean"] == pytest.approx(sum(deltas) / 3)
    assert savings(recs, "grpo", "grpo")["seeds"][0]["ratio"] == pytest.approx(1.0)  # its own first crossing


def test_savings_verdict_when_the_ratio_interval_lies_below_the_goal():
    recs = {}
    for seed, x in enumerate([0.30, 0.32, 0.34]):  # reaches 0.5 at x * 400 rollouts on each seed
        recs[("grpo", seed)] = record("grpo", seed, [100] * 4, {4: 0.5})
        recs[("ds", seed)] = record("ds", seed, [x * 400, 400 - x * 400], {1: 0.5, 2: 0.5})
    s = savings(recs, "ds", "grpo", goal=0.6)
    assert s["ratio"]["mean"] == pytest.approx(0.32)
    assert s["verdict"] == "excludes 0 (claimed side)"


def test_savings_not_reached_reports_a_lower_bound_and_no_interval():
    recs = {("grpo", 0): record("grpo", 0, [100] * 4, {4: 0.5}),
            ("skip", 0): record("skip", 0, [100] * 4, {4: 0.45}),
            ("grpo", 1): record("grpo", 1, [100] * 4, {4: 0.5}),
            ("skip", 1): record("skip", 1, [100] * 4, {2: 0.5, 4: 0.6})}
    s = savings(recs, "skip", "grpo")
    assert s["seeds"][0]["ratio"] is None and s["seeds"][0]["ratio_above"] == pytest.approx(1.0)
    assert s["seeds"][1]["ratio"] == pytest.approx(0.5)
    assert "ratio" not in s and s["verdict"] == "not reached on seed(s) [0]"


def test_savings_never_pairs_runs_on_other_weights():
    recs = {("grpo", 0): record("grpo", 0, [100], {1: 0.5}, weights="a"),
            ("ds", 0): record("ds", 0, [100], {1: 0.6}, weights="b")}
    assert savings(recs, "ds", "grpo")["seeds"] == {}


# ------------------------------------------------------------------------------ the experiment
def test_arms_build_their_methods_name_their_references_and_validate_every_test_freq_steps(rs):
    from devenus.online import WeakTrainerInterface

    arms = {a.name: a for a in rs.arms()}
    assert set(arms) == {"grpo", "grpo+ds", "grpo+skip", "grpo+ds+skip", "ttrl@10", "ttrl@10+ds"}
    for a in arms.values():
        WeakTrainerInterface.get(a.method).build(a.method_config)
        assert f"trainer.test_freq={rs.TEST_FREQ}" in a.overrides
        assert rs.DEFINITION.budget.steps % rs.TEST_FREQ == 0  # the last step is a validation point of the grid
    for arm, ref in rs.REFERENCE.items():
        assert arms[arm].baseline == ref  # the runner's table pairs the same runs as the savings table
    assert any("dynamic_sampling.enabled=true" in o for o in arms["grpo+ds"].overrides)
    assert not any("dynamic_sampling" in o for o in arms["grpo+skip"].overrides)
    assert any("skip.enabled=true" in o for o in arms["grpo+ds+skip"].overrides)
    assert arms["ttrl@10"].labeled_fraction == arms["ttrl@10+ds"].labeled_fraction == 0.1
    # the two TTRL arms differ only in dynamic sampling
    assert arms["ttrl@10+ds"].method_config == arms["ttrl@10"].method_config
    assert set(arms["ttrl@10+ds"].overrides) - set(arms["ttrl@10"].overrides) == set(rs.DS)


def test_the_experiment_plans_paired_runs_on_the_id_questions(rs, tmp_path):
    exp = rs.DEFINITION.experiment(tmp_path / "results" / rs.NAME, tmp_path / "work", validation={
        "test_id": tmp_path / "id.parquet", "test_id_extra": tmp_path / "id_extra.parquet"})
    assert exp.plan([0], ["ttrl@10+ds"]) == [("base", 0), ("ttrl@10", 0), ("ttrl@10+ds", 0)]
    assert len(exp.plan([0, 1, 2])) == 3 * (1 + len(rs.arms()))


def test_the_savings_table_reads_hand_built_records(rs):
    recs = {("base", 0): base(0)}
    for name, per in [("grpo", 100), ("grpo+ds", 200), ("grpo+skip", 100), ("grpo+ds+skip", 150),
                      ("ttrl@10", 200), ("ttrl@10+ds", 300)]:
        recs[(name, 0)] = record(name, 0, [per] * 4, {2: 0.4, 4: 0.5})
    text, numbers = rs.savings_table(recs)
    assert set(numbers) == set(rs.REFERENCE) | {"grpo", "ttrl@10"}
    assert numbers["grpo+ds"]["seeds"][0]["ratio"] == pytest.approx(800 / 400)
    assert "| grpo+ds | grpo | 1 |" in text and "one run: no interval" in text


def test_zero_variance_floor_averages_steps_then_seeds():
    recs = {("grpo+ds", s): {"curves": [{"step": 0, ZERO_VARIANCE: 0.9}]  # step 0 (validation) is not training
                             + [{"step": i + 1, ZERO_VARIANCE: v} for i, v in enumerate(shares)]}
            for s, shares in ((0, [0.1, 0.3]), (1, [0.2, 0.2]), (2, [0.1, 0.2, 0.3]))}
    recs[("grpo", 0)] = {"curves": [{"step": 1}]}  # the seam off: no share logged
    f = zero_variance_floor(recs, "grpo+ds")
    assert [v["share"] for v in f["seeds"].values()] == pytest.approx([0.2, 0.2, 0.2])
    assert f["share"]["mean"] == pytest.approx(0.2) and f["floor"] == pytest.approx(0.8)
    assert zero_variance_floor(recs, "grpo") == {"arm": "grpo", "seeds": {}}


def test_the_savings_table_adds_the_zero_variance_floor_when_runs_log_it(rs):
    recs = {("base", 0): base(0), ("grpo", 0): record("grpo", 0, [100] * 4, {2: 0.4, 4: 0.5})}
    recs[("grpo+ds", 0)] = record("grpo+ds", 0, [150] * 4, {2: 0.4, 4: 0.5})
    for m in recs[("grpo+ds", 0)]["curves"]:
        m[ZERO_VARIANCE] = 0.25
    text, numbers = rs.savings_table(recs)
    assert "| grpo+ds | 1 | 0.250 |" in text and "| 0.75 |" in text
    assert numbers["zero_variance"]["grpo+ds"]["floor"] == pytest.approx(0.75)


def test_the_savings_table_names_a_run_without_the_rollouts_metric(rs):
    recs = {("grpo", 0): record("grpo", 0, [100], {1: 0.5}),
            ("grpo+ds", 0): {**record("grpo+ds", 0, [100], {1: 0.5}), "curves": [{"step": 1}]}}
    text, _ = rs.savings_table(recs)
    assert "- grpo+ds: " in text and "devenus/rollouts/generated" in text


def _overlay_has(section: str) -> bool:
    from devenus.adapters.verl.train import DevenusConfig

    return section in DevenusConfig.__dataclass_fields__


@pytest.mark.skipif(not (_overlay_has("dynamic_sampling") and _overlay_has("skip")),
                    reason="devenus.dynamic_sampling / devenus.skip land with the sampling and skip branches")
def test_every_arms_run_passes_the_trainers_preflight(rs, tmp_path):
    """Each arm's exact command line (the runner's overrides on the testbed recipe, its pool file) passes
    every check ``devenus.train`` runs before Ray starts, and the overlay reads the arm's switches: an
    unknown or misspelt key fails here, not after an hour of runs."""
    from devenus.adapters.verl.cpu.launch import cpu_overrides
    from devenus.adapters.verl.train import check_overlay, preflight
    from devenus.runs.testbed import overrides
    from devenus.testbed import build_testbed

    tb = build_testbed()
    exp = rs.DEFINITION.experiment(tmp_path / "results" / rs.NAME, tmp_path / "work")
    for a in rs.arms():
        out = exp.run_dir(a.name, 0)
        # the CPU backend's own overrides, as devenus.train adds them at launch (one device, local Ray)
        cfg = preflight([*cpu_overrides(), *overrides(tb, out, exp.run_config(a, 0, out, ("devenus.backend=cpu",)))])
        overlay = check_overlay(cfg)
        assert overlay.dynamic_sampling.enabled == any("dynamic_sampling.enabled=true" in o for o in a.overrides)
        assert overlay.skip.enabled == any("skip.enabled=true" in o for o in a.overrides)
        assert cfg.trainer.test_freq == rs.TEST_FREQ and cfg.devenus.method == a.method


def test_the_curve_picture_draws_one_line_per_arm_and_seed(tmp_path):
    pytest.importorskip("matplotlib")
    from devenus.experiments.plot import plot_curves

    panels = {"against grpo": {"grpo": [[(0, 0.3), (400, 0.5)], [(0, 0.3), (400, 0.55)]],
                               "grpo+ds": [[(0, 0.3), (800, 0.6)]], "grpo+skip": []}}
    out = plot_curves("t", panels, tmp_path / "c.png", {"against grpo": (0.52, 400, 0.6)})
    assert out == tmp_path / "c.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_curves("t", {"against grpo": {"grpo": []}}, tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_write_report_refuses_mixed_weights_and_never_starts_a_curve_at_another_models_base(rs, tmp_path, monkeypatch):
    """Seed 1's base run is of other weights: the report is refused; allowed, seed 1's curves start at
    their first validation point, not at the other model's step-0 accuracy."""
    pytest.importorskip("matplotlib")
    import devenus.experiments.plot as plot
    from devenus.experiments.provenance import MixedResults, Mixing

    exp = rs.DEFINITION.experiment(tmp_path / "results" / rs.NAME, tmp_path / "work", validation={"test_id": tmp_path / "v.parquet"})
    exp.log = lambda s: None
    code = {"commit": None, "dirty": None, "version": "0.1.0", "tree": "tree-a"}

    def save(r):
        r = {**r, "experiment": rs.NAME, "fingerprint": exp.fingerprint(exp.arm(r["name"])), "code": code,
             "returncode": 0, "per_question": {"ID": {"q": r["accuracy"]["ID"]}}, "wall_s": 1.0, "startup_s": None,
             "val_samples": 4, "curves": r.get("curves", [])}
        exp._save(r["name"], r["seed"], r)

    for seed in (0, 1):
        save(base(seed, acc=0.25 if seed == 0 else 0.40, weights="w1" if seed == 0 else "w2"))
        save(record("grpo", seed, [100] * 10, {5: 0.3, 10: 0.5}))
        save(record("grpo+ds", seed, [100] * 10, {5: 0.4, 10: 0.5}))
    with pytest.raises(MixedResults, match=r"w1 \(base s0; grpo s0,1; grpo\+ds s0,1\) vs w2 \(base s1\)"):
        rs.DEFINITION.write_report(exp)
    drawn = {}
    monkeypatch.setattr(plot, "plot_curves", lambda name, panels, out, targets: drawn.update(panels))
    exp.mixing = Mixing(weights=True)
    rs.DEFINITION.write_report(exp)
    seed0, seed1 = drawn["against grpo"]["grpo"]
    assert seed0 == [(0.0, 0.25), (500.0, 0.3), (1000.0, 0.5)]  # from its own base run
    assert seed1 == [(500.0, 0.3), (1000.0, 0.5)]  # the w2 base run is another model's step 0
