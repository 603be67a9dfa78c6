"""semi_powered: semi_paired's design and rule on twelve new seeds, on hand-built records whose answer is known."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import semi_powered

from test_semi_paired import _claim, _recs


def test_the_design_is_semi_paireds_on_twelve_new_seeds(monkeypatch):
    from devenus.experiments import pool

    earlier = [EXPERIMENTS.get(n) for n in ("refine_mechanism", "semi_confirm", "semi_paired")]
    d = EXPERIMENTS.get("semi_powered")
    assert d.arms == earlier[2].arms and d.budget == earlier[2].budget
    assert d.seeds == tuple(range(9, 21)) and not any(set(d.seeds) & set(e.seeds) for e in earlier)
    seen = []  # the pools refine_mechanism would draw for these seeds
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    d.train_file.draw(type("E", (), {"name": "semi_powered"})(), None, 12)
    assert seen == [("refine_mechanism", 12, 128)]


def test_its_report_decides_on_all_twelve_seeds_and_no_fewer(tmp_path):
    def _report(semi: dict) -> str:  # the definition's own report, written beside a results folder in tmp_path
        exp = type("E", (), {"finished": lambda self: _recs(semi), "name": "semi_powered",
                             "results": tmp_path / "semi_powered"})()
        return semi_powered.DEFINITION.report(exp)

    # per-seed differences +0.029 to +0.038 (semi 330-333 of 342 right against 500/570): above, and inside the
    # margin; decide() calls a rejected t test with a positive mean "above"
    above = {s: (330 + s % 4, 342) for s in semi_powered.SEEDS}
    text = _report(above)
    assert "semi_powered: semi_confirm's design on seeds 9-20 alone" in text
    assert _claim(text).endswith("| above the reference |"), _claim(text)
    assert "(12) |" in _claim(text)
    level = {s: (299 + 2 * (s % 2), 342) for s in semi_powered.SEEDS}  # -0.003 / +0.003 about the reference
    assert _claim(_report(level)).endswith("| level within the margin |")
    eleven = {s: c for s, c in level.items() if s != 20}
    assert _claim(_report(eleven)).endswith("| not read: 11 of 12 seeds finished |")
    # semi_paired's own seeds in the records are not read by this plan
    assert _claim(_report({5: (330, 342), 6: (331, 342)})).endswith("| not read: 0 of 12 seeds finished |")
    assert (tmp_path / "semi_powered_verdicts.md").read_text().startswith("semi_powered: ")
