"""geomin_mechanism: ten_percent_labels' GeoMin arm on new seeds, and its verdict on hand-built counts whose
answer is known: the runs pooled, no verdict before every planned seed."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import geomin_mechanism as gm


def test_the_arm_is_ten_percent_labels_geomin_on_new_pools(monkeypatch):
    from devenus.experiments import pool

    exp, pilot = EXPERIMENTS.get("geomin_mechanism"), EXPERIMENTS.get("ten_percent_labels")
    (arm,) = exp.arms
    ref = next(a for a in pilot.arms if a.name == "geomin@10")
    assert (arm.method, arm.labeled_fraction, arm.method_config) == (ref.method, ref.labeled_fraction, ref.method_config)
    assert arm.baseline == "base" and exp.budget == pilot.budget and not set(exp.seeds) & set(pilot.seeds)
    seen = []
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    exp.train_file.draw(type("E", (), {"name": "geomin_mechanism"})(), None, 6)
    assert seen == [("ten_percent_labels", 6, 512)]


def _recs(seeds, admitted, rejected):
    def m(n, d):
        return {"num": n, "den": d, "value": n / d}
    return {(gm.ARM, s): {"mechanism": {f"devenus/mechanism/{gm.ADMITTED}": m(*admitted),
                                        f"devenus/mechanism/{gm.REJECTED}": m(*rejected)}, "accuracy": {"ID": 0.43}}
            for s in seeds}


def _row(text):
    return next(r for r in text.splitlines() if r.startswith(("| 8 |", "| 7 |")))


def test_the_verdicts_on_known_counts():
    # the pilot's counts on each of 8 runs: 1120/1416 vs 2208/2768, -0.007; half-width 1.96 x sqrt(1.4 x (...))
    # = 0.031: inside ±0.05
    level = _row(gm.verdict_text(_recs(gm.SEEDS, (140, 177), (276, 346))))
    assert "| 0.791 (1120/1416) | 0.798 (2208/2768) | -0.007 [-0.037, +0.024] | no separation within the margin |" in level
    better = _row(gm.verdict_text(_recs(gm.SEEDS, (160, 177), (276, 346))))
    assert better.endswith("| admits the better pseudo labels |")
    worse = _row(gm.verdict_text(_recs(gm.SEEDS, (120, 177), (276, 346))))
    assert worse.endswith("| admits the worse |")
    assert "not read: 7 of 8 seeds finished" in _row(gm.verdict_text(_recs(gm.SEEDS[:7], (140, 177), (276, 346))))


def test_the_replication_is_the_same_design_on_new_seeds_decided_by_the_same_rule():
    from devenus.experiments.definitions import geomin_confirm as gc

    exp, pilot = EXPERIMENTS.get("geomin_confirm"), EXPERIMENTS.get("geomin_mechanism")
    assert exp.arms == pilot.arms and exp.budget == pilot.budget and exp.train_file is pilot.train_file
    assert exp.seeds == tuple(range(13, 29)) and not set(exp.seeds) & set(pilot.seeds)
    text = gm.verdict_text(_recs(gc.SEEDS, (140, 177), (47, 59)), gc.NAME, gc.SEEDS)
    assert text.startswith("geomin_confirm: ") and "seeds 13-28 pooled" in text
    # 2832 admitted, 944 rejected (the plan's power case), both near 0.79: half-width 0.035, inside ±0.05
    row = next(r for r in text.splitlines() if r.startswith("| 16 |"))
    assert row.endswith("| -0.006 [-0.041, +0.030] | no separation within the margin |")
    early = gm.verdict_text(_recs(gc.SEEDS[:15], (140, 177), (47, 59)), gc.NAME, gc.SEEDS)
    assert "not read: 15 of 16 seeds finished" in early
