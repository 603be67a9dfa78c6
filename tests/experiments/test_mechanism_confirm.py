"""mechanism_confirm: mechanism_sweep's design arm for arm on new seeds, and its verdicts on hand-built
records whose answers are known: each arm's runs pooled, no verdict before every planned seed."""

import pytest

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import mechanism_confirm as mc
from devenus.experiments.mechanism import AUROC


def test_the_replication_is_the_pilots_design_on_new_seeds(monkeypatch):
    from devenus.experiments import pool

    pilot, confirm = EXPERIMENTS.get("mechanism_sweep"), EXPERIMENTS.get("mechanism_confirm")
    arms = {a.name: a for a in pilot.arms}
    assert [a.name for a in confirm.arms] == ["ttrl@0", "corewarding2@0", "intuitor@0"]
    assert all(a == arms[a.name] for a in confirm.arms)
    assert confirm.budget == pilot.budget and confirm.seeds == (1, 2, 3, 4) and not set(confirm.seeds) & set(pilot.seeds)
    seen = []
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    confirm.train_file.draw(type("E", (), {"name": "mechanism_confirm"})(), None, 2)
    assert seen == [("mechanism_sweep", 2, 512)]


def _target(n, d):
    return {"devenus/mechanism/pseudo_target/precision": {"num": n, "den": d, "value": n / d}}


def _auroc(values):
    return {AUROC: {"num": 0, "den": 1, "value": sum(values) / len(values), "series": list(enumerate(values, 1))}}


def _recs(seeds, core=(129, 150), ttrl=(142, 165), auroc=(0.5, 0.7)):
    recs = {}
    for s in seeds:
        recs[("ttrl@0", s)] = {"mechanism": _target(*ttrl)}
        recs[("corewarding2@0", s)] = {"mechanism": _target(*core)}
        recs[("intuitor@0", s)] = {"mechanism": _auroc([auroc[i % 2] for i in range(16)])}
    return recs


def _row(text, arm):
    return next(r for r in text.splitlines() if r.startswith(f"| {arm} | ") and "pooled" not in r and "(" in r)


def test_the_runs_are_pooled_and_each_verdict_read():
    text = mc.confirm_text(_recs(mc.SEEDS))
    core = _row(text, "corewarding2@0")
    # 516/600 vs 568/660: -0.001, +- 0.038 with four runs pooled (the pilot's one run gave +- 0.077)
    assert "| 4 | pseudo-target precision | 0.860 (516/600) |" in core and core.endswith("| level within the margin |")
    lo, hi = (float(x) for x in core.split("| -0.001 [")[1].split("]")[0].split(", "))
    assert hi - lo == pytest.approx(2 * 0.0383, abs=2e-3)
    intuitor = _row(text, "intuitor@0")
    # 64 steps alternating 0.5 / 0.7: mean 0.6, well above 0.5
    assert "(64 steps; per-run means 0.600 ± 0.000)" in intuitor and intuitor.endswith("| ranks right answers higher |")
    assert "Per run (the pilot's table, a description)" in text


def test_the_other_verdicts_and_no_interim_look():
    chance = mc.confirm_text(_recs(mc.SEEDS, core=(300, 600), auroc=(0.49, 0.51)))
    assert _row(chance, "intuitor@0").endswith("| at chance within the margin |")
    assert _row(chance, "corewarding2@0").endswith("| below the reference |")
    early = mc.confirm_text(_recs(mc.SEEDS[:3]))
    assert _row(early, "corewarding2@0").endswith("| not read: 3 of 4 seeds finished |")
    assert _row(early, "intuitor@0").endswith("| not read: 3 of 4 seeds finished |")
