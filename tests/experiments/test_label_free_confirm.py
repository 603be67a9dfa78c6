"""label_free_confirm: ten_percent_labels' grpo_full and ttrl@0 on new seeds, its claim decided on those
alone, on hand-built records whose answer is known."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import label_free_confirm as lf


def test_the_replication_is_the_pilots_design_on_new_seeds(monkeypatch):
    from devenus.experiments import pool

    pilot, confirm = EXPERIMENTS.get("ten_percent_labels"), EXPERIMENTS.get("label_free_confirm")
    arms = {a.name: a for a in pilot.arms}
    assert [a.name for a in confirm.arms] == ["grpo_full", "ttrl@0"] and all(a == arms[a.name] for a in confirm.arms)
    assert arms["ttrl@0"].baseline == "grpo_full" and arms["ttrl@0"].claimed_side == -1
    assert confirm.budget == pilot.budget and confirm.seeds == (5, 6, 7, 8, 9) and not set(confirm.seeds) & set(pilot.seeds)
    seen = []
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    confirm.train_file.draw(type("E", (), {"name": "label_free_confirm"})(), None, 7)
    assert seen == [("ten_percent_labels", 7, 512)]


def _recs(seeds, diffs):
    w = {"sha256": "w"}
    out = {}
    for s, d in zip(seeds, diffs):
        out[("grpo_full", s)] = {"accuracy": {"ID": 0.58}, "base_model": w}
        out[("ttrl@0", s)] = {"accuracy": {"ID": 0.58 + d}, "base_model": w}
    return out


def _row(text):
    return next(r for r in text.splitlines() if r.startswith("| ttrl@0 vs grpo_full, - |"))


def test_the_claim_is_decided_on_the_new_seeds_alone():
    pilot = _recs((0, 1, 2), (-0.126, -0.133, -0.048))
    text = lf.replication_text(lf.NAME, _recs(lf.SEEDS, (-0.10, -0.08, -0.12, -0.09, -0.11)), lf.CLAIMS, lf.MARGIN,
                               lf.SEEDS, "ten_percent_labels", pilot, lf.PILOT_SEEDS)
    row = _row(text)
    assert "| -0.100 ± 0.020 (5) |" in row and "| reproduced |" in row
    assert "| -0.102 ± 0.117 (3) |" in row and row.endswith("| -0.101 ± 0.023 (8) |")
    # a gain, and a tight null, on the new seeds
    up = _row(lf.replication_text(lf.NAME, _recs(lf.SEEDS, (0.05, 0.06, 0.04, 0.05, 0.05)), lf.CLAIMS, lf.MARGIN,
                                  lf.SEEDS, "p", pilot, lf.PILOT_SEEDS))
    assert "| wrong side |" in up
    null = _row(lf.replication_text(lf.NAME, _recs(lf.SEEDS, (0.001, -0.002, 0.0, 0.002, -0.001)), lf.CLAIMS, lf.MARGIN,
                                    lf.SEEDS, "p", pilot, lf.PILOT_SEEDS))
    assert "| null within margin |" in null


def test_no_interim_look():
    text = lf.replication_text(lf.NAME, _recs(lf.SEEDS[:4], (-0.1,) * 4), lf.CLAIMS, lf.MARGIN, lf.SEEDS, "p", {},
                               lf.PILOT_SEEDS)
    assert "not read: 4 of 5 seeds finished" in _row(text)


def test_the_committed_pilot_is_read_across_its_two_code_versions():
    # the label_free plan paired ttrl@0 (one code version) with ten_percent_labels' grpo_full (another), as it
    # said it would; the replication prints that pilot beside its own seeds instead of refusing the table
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "experiments" / "results" / "label_free_confirm"
    text = lf._claims(EXPERIMENTS.get("label_free_confirm").experiment(results))
    assert "| -0.103 ± 0.117 (3) |" in _row(text)
