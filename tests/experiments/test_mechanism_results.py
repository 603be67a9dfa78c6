"""A run's mechanism metrics in its result, and per arm in the report, from a hand-made metrics file in
verl's file-tracker format (one ``{"step": N, "data": {...}}`` per line, as tests/runs/train_metrics.jsonl)."""

import json

import pytest

from devenus.experiments.mechanism import arm_mechanism, run_mechanism
from devenus.experiments.runner import BASE, Arm, Experiment, training_curves
from devenus.runs.logs import read_metrics

PT = "devenus/mechanism/pseudo_target"
RA = "devenus/mechanism/reward_auroc"
SK = "devenus/skip"


def tracker_file(path, steps):
    path.write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in steps))
    return path


# step 1: 3 of 4 groups given a target, 2 right; step 2: 1 of 6 given, 1 right; step 3 logs no pseudo-target
# group (denominators 0: the ratios are not logged). AUROC: 0.75 over 2x2 pairs, then 0.5 over 1x3 pairs.
# Skip audit: 4 audited, 3 zero-variance; then 1 audited, 0 zero-variance.
STEPS = [
    (0, {"val-core/x/acc/mean@2": 0.4}),
    (1, {f"{PT}/seen": 4.0, f"{PT}/given": 3.0, f"{PT}/right": 2.0, f"{PT}/coverage": 0.75, f"{PT}/precision": 2 / 3,
         f"{RA}/rows": 4.0, f"{RA}/correct": 2.0, f"{RA}/auroc": 0.75,
         f"{SK}/audited": 4.0, f"{SK}/audited_zero_variance": 3.0, f"{SK}/precision": 0.75,
         "actor/pg_loss": 0.1, "timing_s/step": 3.0}),
    (2, {f"{PT}/seen": 6.0, f"{PT}/given": 1.0, f"{PT}/right": 1.0, f"{PT}/coverage": 1 / 6, f"{PT}/precision": 1.0,
         f"{RA}/rows": 4.0, f"{RA}/correct": 1.0, f"{RA}/auroc": 0.5,
         f"{SK}/audited": 1.0, f"{SK}/audited_zero_variance": 0.0, f"{SK}/precision": 0.0}),
    (3, {f"{PT}/seen": 0.0, f"{PT}/given": 0.0, f"{PT}/right": 0.0, f"{RA}/rows": 4.0, f"{RA}/correct": 4.0,
         f"{SK}/audited": 0.0, f"{SK}/audited_zero_variance": 0.0}),
]


def test_a_runs_ratio_is_summed_numerators_over_summed_denominators(tmp_path):
    curves = training_curves(read_metrics(tracker_file(tmp_path / "m.jsonl", STEPS)))
    assert [c["step"] for c in curves] == [1, 2, 3] and "actor/pg_loss" not in curves[0]
    m = run_mechanism(curves)
    cov, prec = m[f"{PT}/coverage"], m[f"{PT}/precision"]
    assert (cov["num"], cov["den"], cov["value"]) == (4.0, 10.0, pytest.approx(0.4))  # not (0.75 + 1/6) / 2
    assert prec["value"] == pytest.approx(3 / 4) and prec["steps"] == 2  # not (2/3 + 1) / 2
    assert prec["series"] == [[1, pytest.approx(2 / 3)], [2, 1.0]]
    # AUROC over pairs within a step: (0.75 * 4 + 0.5 * 3) / (4 + 3); step 3 has one class only
    a = m[f"{RA}/auroc"]
    assert (a["value"], a["den"], a["steps"]) == (pytest.approx(4.5 / 7), 7.0, 2)
    sk = m[f"{SK}/precision"]
    assert (sk["num"], sk["den"], sk["value"]) == (3.0, 5.0, pytest.approx(0.6))
    # a kind no step logged is absent, not 0
    assert not any(k.startswith("devenus/mechanism/correction") for k in m)
    assert run_mechanism([{"step": 1, "devenus/rollouts/generated": 8.0}]) == {}


def test_per_arm_interval_over_seeds_and_pooled_ratio():
    runs = {0: {"k": {"value": 0.5, "num": 1.0, "den": 2.0}}, 1: {"k": {"value": 0.7, "num": 7.0, "den": 10.0}},
            2: {"k": {"value": 0.9, "num": 9.0, "den": 10.0}}, 3: {}}
    k = arm_mechanism(runs)["k"]
    assert k["seeds"] == [0, 1, 2] and k["n"] == 3 and k["mean"] == pytest.approx(0.7)
    assert k["half_width"] == pytest.approx(4.3027 * 0.2 / 3 ** 0.5, rel=1e-4)  # t(2) over the 3 runs' values
    assert k["pooled"] == pytest.approx(17 / 22)


def test_the_report_shows_each_arms_mechanism_metrics(tmp_path):
    exp = Experiment("m", [Arm("ttrl", "ttrl")], {"steps": 3}, results=tmp_path / "results" / "m",
                     work=tmp_path / "work", log=lambda s: None)
    exp._base_model_id = "weights-a"
    exp._code = {"commit": "c0ffee" * 6 + "abcd", "dirty": False, "version": "0.1.0", "tree": "tree-a"}
    curves = training_curves(read_metrics(tracker_file(tmp_path / "m.jsonl", STEPS)))
    for seed in (0, 1):
        for name in (BASE, "ttrl"):
            rec = {"experiment": "m", "name": name, "seed": seed, "fingerprint": exp.fingerprint(exp.arm(name)),
                   "base_model": "weights-a", "code": exp._code, "returncode": 0, "wall_s": 1.0, "startup_s": None,
                   "per_question": {"ID": {"q": 0.5}}, "accuracy": {"ID": 0.5}, "val_samples": 2,
                   "curves": curves if name == "ttrl" else []}
            if seed == 0 and name == "ttrl":
                rec["mechanism"] = run_mechanism(curves)  # as run_one writes it; seed 1 predates the field
            exp._save(name, seed, rec)
    comp = exp.comparisons()
    assert "mechanism" not in comp[BASE]
    prec = comp["ttrl"]["mechanism"][f"{PT}/precision"]
    assert prec["seeds"] == [0, 1] and prec["mean"] == pytest.approx(0.75) and prec["half_width"] == pytest.approx(0.0)
    table = exp.report(write=False)
    assert "| ttrl | pseudo_target/precision | 2 | 0.750 ± 0.000 | 0.750 | 6 / 8 |" in table
    assert "| ttrl | skip/precision | 2 | 0.600 ± 0.000 | 0.600 | 6 / 10 |" in table
