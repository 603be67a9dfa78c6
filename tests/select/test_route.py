"""Routing rules on hand-made scores (pure functions), and the route core on a table of them."""

import numpy as np
import pytest

from devenus.select.config import load_config
from devenus.select.stages.route import route_scores
from devenus.select.route import ANNOTATE, DISCARD, KEEP, WEAK, interval_mask, interval_route, ratio_route, tiebreak
from devenus.select.route.ratios import ratio_counts

P = np.array([0.0, 0.125, 0.25, 0.5, 0.75, 0.875, 1.0, np.nan])


@pytest.mark.parametrize("preset,want", [
    ("dapo", [0, 1, 1, 1, 1, 1, 0, 0]),
    ("balanced", [0, 0, 1, 1, 1, 0, 0, 0]),
    ("polaris", [1, 1, 1, 1, 1, 1, 0, 0]),
])
def test_interval_presets(preset, want):
    cfg = load_config(None, {"route.selector": "interval", "route.interval": preset})
    assert interval_mask(P, *cfg.route.bounds()).astype(int).tolist() == want


def test_custom_interval_is_inclusive():
    cfg = load_config(None, {"route.selector": "interval", "route.interval": "custom", "route.low": 0.125, "route.high": 0.5})
    assert interval_mask(P, *cfg.route.bounds()).astype(int).tolist() == [0, 1, 1, 1, 0, 0, 0, 0]


def test_interval_budget_keeps_the_most_uncertain_inside():
    p = np.array([0.5, 0.5, 0.5, 1.0, 0.5])
    u = np.array([0.1, 0.9, 0.5, 5.0, 0.7])  # the p = 1 question is the most uncertain but outside
    ties = np.zeros(5, np.uint64)
    dec = interval_route(p, u, ties, (0.0, 1.0, False, False), budget=2)
    assert dec.tolist() == [DISCARD, KEEP, DISCARD, DISCARD, KEEP]
    assert (interval_route(p, u, ties, (0.0, 1.0, False, False)) == KEEP).sum() == 4


def test_ratio_route():
    u = np.arange(10, dtype=float)  # question 9 is the most uncertain
    dec = ratio_route(u, np.zeros(10, np.uint64), 0.3, 0.4)
    assert dec.tolist() == [DISCARD] * 4 + [WEAK] * 3 + [ANNOTATE] * 3
    capped = ratio_route(u, np.zeros(10, np.uint64), 0.3, 0.4, annotation_budget=1)
    assert capped.tolist() == [DISCARD] * 4 + [WEAK] * 5 + [ANNOTATE]
    assert ratio_counts(1000, 0.293, 0.421) == (293, 421)
    assert ratio_counts(3, 0.9, 0.9) == (3, 0)


def test_ties_are_broken_by_key_not_by_position():
    keys = [f"q{i}" for i in range(50)]
    u = np.zeros(50)
    dec = ratio_route(u, tiebreak(keys, 0), 0.2, 0.2)
    perm = np.random.default_rng(0).permutation(50)
    dec_perm = ratio_route(u[perm], tiebreak([keys[i] for i in perm], 0), 0.2, 0.2)
    assert dict(zip(keys, dec)) == dict(zip([keys[i] for i in perm], dec_perm))
    assert not np.array_equal(tiebreak(keys, 0), tiebreak(keys, 1))


def test_route_scores_calibrates_the_sign_on_labeled_rows():
    n = 40
    rng = np.random.default_rng(0)
    wrong = rng.random(n) < 0.5
    u = np.where(wrong, -1.0, 1.0) + rng.normal(0, 0.1, n)  # ranks the wrong way round
    keys = [f"q{i}" for i in range(n)]
    cfg = load_config(None, {"route.signal": "entropy", "route.calibrate_sign": True})
    dec, info = route_scores({"u_entropy": u, "majority_correct": (~wrong).astype(float)}, keys, cfg)
    assert info["sign"] == -1 and info["calibration_auroc"] < 0.1
    assert np.all(wrong[dec == ANNOTATE])  # after the flip, the annotated questions are the wrong ones


def test_the_sign_is_calibrated_on_the_labeled_rows_of_a_partly_labeled_pool():
    n = 60
    rng = np.random.default_rng(1)
    wrong = rng.random(n) < 0.5
    u = np.where(wrong, -1.0, 1.0) + rng.normal(0, 0.1, n)  # ranks the wrong way round
    mc = (~wrong).astype(float)
    mc[::3] = np.nan  # unlabeled rows: no correctness known, left out of the calibration
    cfg = load_config(None, {"route.signal": "entropy", "route.calibrate_sign": True})
    dec, info = route_scores({"u_entropy": u, "majority_correct": mc}, [f"q{i}" for i in range(n)], cfg)
    assert info["sign"] == -1 and info["calibration_rows"] == n - len(range(0, n, 3))
    assert info["calibration_auroc"] < 0.1


def test_random_routing_is_a_seeded_uniform_order_at_the_same_budgets():
    n = 1000
    keys = [f"q{i}" for i in range(n)]
    u = np.linspace(0.0, 1.0, n)  # a real signal present in the table: random routing must ignore it
    by_signal = route_scores({"u_entropy": u}, keys, load_config(None, {"route.signal": "entropy"}))[0]
    picks = []
    for seed in (0, 0, 1):
        cfg = load_config(None, {"route.signal": "random", "route.seed": seed, "score.signals": ["entropy"]})
        dec, info = route_scores({"u_entropy": u}, keys, cfg)
        assert info["signal"] == "random"
        # the same counts as any ratio routing of these n questions
        for code in (ANNOTATE, WEAK, DISCARD):
            assert (dec == code).sum() == (by_signal == code).sum()
        picks.append(dec)
    assert np.array_equal(picks[0], picks[1]) and not np.array_equal(picks[0], picks[2])
    # uniform: the annotated questions are spread over the signal's range, not its top
    annotated = u[picks[0] == ANNOTATE]
    assert 0.35 < annotated.mean() < 0.65 and annotated.min() < 0.1 and annotated.max() > 0.9
    # an order from the seeded tie-breaker alone, not a function of the row's position
    order = np.argsort(tiebreak(keys, 0))
    assert np.all(picks[0][order[: (picks[0] == ANNOTATE).sum()]] == ANNOTATE)


def test_random_routing_config_errors():
    load_config(None, {"route.signal": "random", "score.signals": ["consistency"]})  # needs no score
    with pytest.raises(ValueError, match="random has no scores to calibrate"):
        load_config(None, {"route.signal": "random", "route.selector": "triage"})
    with pytest.raises(ValueError, match="random has no scores to calibrate"):
        load_config(None, {"route.signal": "random", "route.calibrate_sign": True})
    with pytest.raises(ValueError, match="seeded random order"):
        load_config(None, {"route.signal": "entropi"})


def test_missing_scores_are_an_error_naming_a_question():
    cfg = load_config(None, {"route.signal": "accuracy"})
    with pytest.raises(ValueError, match="'q1'"):
        route_scores({"u_accuracy": np.array([0.5, np.nan])}, ["q0", "q1"], cfg)


def test_config_errors():
    with pytest.raises(ValueError, match="rho_annotate"):
        load_config(None, {"route.rho_annotate": 0.7, "route.rho_discard": 0.5})
    with pytest.raises(ValueError, match=r"unknown key generate.sampels \(did you mean generate.samples\?\)"):
        load_config(None, {"generate.sampels": 4})
    with pytest.raises(ValueError, match="needs the accuracy signal"):
        load_config(None, {"route.selector": "interval", "score.signals": ["entropy"], "route.signal": "entropy"})


def test_aggregate_matrix_matches_the_per_question_rule():
    from devenus.select.score import aggregate, aggregate_matrix

    rng = np.random.default_rng(0)
    v = rng.normal(size=(30, 8))
    v[3, 2] = np.nan
    v[4, :] = np.nan
    agrees = rng.random((30, 8)) < 0.5
    agrees[5] = False
    for how in ("mean", "median", "majority"):
        got = aggregate_matrix(v, how, agrees)
        want = [aggregate(v[i], how, agrees[i]) for i in range(30)]
        np.testing.assert_allclose(got, want, equal_nan=True)


def test_stage_folder_rules(tmp_path):
    from devenus.select.shards import Stage, StageError, write_table
    import pyarrow as pa

    st = Stage(tmp_path / "score", "score", {"a": 1}).open()
    write_table(pa.table({"x": [1]}), st.shard_path(0))
    write_table(pa.table({"x": [1]}), st.folder / "questions-00000.parquet")
    assert st.has(0) and not st.done
    with pytest.raises(StageError, match="not complete"):
        st.require_done("route")
    st.finish({"n": 1})
    assert Stage(tmp_path / "score", "score", {"a": 1}).open().has(0)  # same config: shards kept
    with pytest.raises(StageError, match="another config"):
        Stage(tmp_path / "score", "score", {"a": 2}).open()
    with pytest.raises(StageError, match="another config"):
        Stage(tmp_path / "score", "score", {"a": 2}).check()
    again = Stage(tmp_path / "score", "score", {"a": 2}).open(force=True)  # force: start over
    assert not again.has(0) and not again.done and not list(again.folder.glob("*.parquet"))
