"""semi_paired: semi_confirm's design on new seeds, decided with the run as the unit, on hand-built records
whose answer is known: per-seed differences, a paired t test and TOST, no verdict before every planned seed."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import semi_paired as sp


def test_the_design_is_semi_confirms_on_new_seeds(monkeypatch):
    from devenus.experiments import pool

    earlier = [EXPERIMENTS.get(n) for n in ("refine_mechanism", "semi_confirm")]
    d = EXPERIMENTS.get("semi_paired")
    assert d.arms == earlier[1].arms and d.budget == earlier[1].budget
    assert d.seeds == (5, 6, 7, 8) and not any(set(d.seeds) & set(e.seeds) for e in earlier)
    seen = []  # the pools refine_mechanism would draw for these seeds
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    d.train_file.draw(type("E", (), {"name": "semi_paired"})(), None, 6)
    assert seen == [("refine_mechanism", 6, 128)]


def _recs(semi: dict, ttrl=(500, 570)):
    """``semi`` maps a seed to its (right, targets); the reference is the same counts on every seed."""
    def rec(n, d):
        return {"mechanism": {"devenus/mechanism/pseudo_target/precision": {"num": n, "den": d, "value": n / d},
                              "devenus/mechanism/pseudo_target/coverage": {"num": d, "den": 700, "value": d / 700}},
                "accuracy": {"ID": 0.5}}
    recs = {("ttrl@0", s): rec(*ttrl) for s in semi}
    recs.update({("semi@40", s): rec(*c) for s, c in semi.items()})
    return recs


def _claim(text):
    return next(r for r in text.splitlines() if r.startswith("| semi@40 vs ttrl@0, + |"))


def test_level_above_below_and_no_interim_look():
    ref = 500 / 570
    level = _claim(sp.paired_text(_recs({5: (300, 342), 6: (301, 342), 7: (299, 342), 8: (302, 342)})))
    assert level.endswith("| level within the margin |"), level
    assert f"| {300 / 342 - ref:+.3f} / " in level
    above = _claim(sp.paired_text(_recs({5: (330, 342), 6: (331, 342), 7: (329, 342), 8: (332, 342)})))
    assert above.endswith("| above the reference |"), above
    below = _claim(sp.paired_text(_recs({5: (250, 342), 6: (251, 342), 7: (249, 342), 8: (252, 342)})))
    assert below.endswith("| below the reference |"), below
    # a spread as wide as the margin: neither test rejects
    wide = _claim(sp.paired_text(_recs({5: (330, 342), 6: (280, 342), 7: (320, 342), 8: (290, 342)})))
    assert wide.endswith("| inconclusive |"), wide
    early = _claim(sp.paired_text(_recs({5: (300, 342), 6: (301, 342), 7: (299, 342)})))
    assert early.endswith("| not read: 3 of 4 seeds finished |")


def test_semi_confirms_pooled_rule_is_printed_on_these_seeds():
    text = sp.paired_text(_recs({5: (300, 342), 6: (301, 342), 7: (299, 342), 8: (302, 342)}))
    assert "semi_paired: refine_mechanism's semi-supervised verdict on seeds 5-8 alone" in text
    assert "| semi@40 | 4 | 0.879 (1202/1368) |" in text
