"""semi_confirm: refine_mechanism's two TTRL arms on new seeds, and its verdict on hand-built records whose
answer is known: each arm's runs pooled, no verdict before every planned seed."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import semi_confirm as sc


def test_the_replication_is_the_pilots_design_on_new_seeds(monkeypatch):
    from devenus.experiments import pool

    pilot, confirm = EXPERIMENTS.get("refine_mechanism"), EXPERIMENTS.get("semi_confirm")
    arms = {a.name: a for a in pilot.arms}
    assert [a.name for a in confirm.arms] == ["ttrl@0", "semi@40"]
    assert all(a == arms[a.name] for a in confirm.arms)
    assert confirm.budget == pilot.budget and confirm.seeds == (1, 2, 3, 4) and not set(confirm.seeds) & set(pilot.seeds)
    seen = []
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    confirm.train_file.draw(type("E", (), {"name": "semi_confirm"})(), None, 3)
    assert seen == [("refine_mechanism", 3, 128)]


def _recs(seeds, semi=(339, 347), ttrl=(546, 570)):
    def mech(n, d):
        return {"devenus/mechanism/pseudo_target/precision": {"num": n, "den": d, "value": n / d},
                "devenus/mechanism/pseudo_target/coverage": {"num": d, "den": d + 100, "value": d / (d + 100)}}
    recs = {}
    for s in seeds:
        recs[("ttrl@0", s)] = {"mechanism": mech(*ttrl), "accuracy": {"ID": 0.5}}
        recs[("semi@40", s)] = {"mechanism": mech(*semi), "accuracy": {"ID": 0.55}}
    return recs


def _row(text, arm):
    return next(r for r in text.splitlines() if r.startswith(f"| {arm} | 4 |") or r.startswith(f"| {arm} | 3 |"))


def test_the_runs_are_pooled_and_the_verdict_read():
    text = sc.confirm_text(_recs(sc.SEEDS))
    semi = _row(text, "semi@40")
    # the pilot's counts four times: 1356/1388 vs 2184/2280, +0.019 with half-width 0.028 (the pilot's one run:
    # 0.056): inside ±0.05
    assert "| 4 | 0.977 (1356/1388) |" in semi and semi.endswith("| level within the margin |")
    lo, hi = (float(x) for x in semi.split("| +0.019 [")[1].split("]")[0].split(", "))
    assert abs((hi - lo) / 2 - 0.028) < 2e-3
    assert "| semi@40 | 2 | 0.977 (339/347) | 0.776 (347/447) | 0.550 |" in text  # per run, a description


def test_the_other_verdicts_and_no_interim_look():
    above = sc.confirm_text(_recs(sc.SEEDS, semi=(340, 340), ttrl=(480, 570)))
    assert _row(above, "semi@40").endswith("| above the reference |")
    below = sc.confirm_text(_recs(sc.SEEDS, semi=(250, 347)))
    assert _row(below, "semi@40").endswith("| below the reference |")
    early = sc.confirm_text(_recs(sc.SEEDS[:3]))
    assert _row(early, "semi@40").endswith("| not read: 3 of 4 seeds finished |")
