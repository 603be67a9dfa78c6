"""Probe-calibrated triage: probes spread over the ranking, windowed thresholds, routing under a
budget (pure functions on hand-made numbers), and the route core with a stand-in annotator."""

import numpy as np
import pytest

from devenus.select.config import load_config
from devenus.select.stages.route import route_scores
from devenus.select.route import ANNOTATE, DISCARD, WEAK, calibrate, draw_probes, triage_route
from devenus.select.route.triage import isotonic_decreasing


def test_probes_are_spread_over_the_ranking():
    u = np.random.default_rng(0).random(1000)
    ties = np.zeros(1000, np.uint64)
    probes = draw_probes(u, ties, fraction=0.03, minimum=50, seed=0)
    assert len(probes) == 50 and len(set(probes.tolist())) == 50
    ranks = np.argsort(np.argsort(u))[probes]  # 0 = least uncertain
    assert np.all(np.diff(ranks) > 0)  # sorted from the least uncertain up
    assert np.all(np.diff(ranks) <= 21) and ranks[0] < 20 and ranks[-1] >= 980  # one per stride of 20
    assert len(draw_probes(u, ties, fraction=0.1, minimum=50)) == 100
    assert len(draw_probes(u[:30], ties[:30])) == 30  # a pool smaller than the minimum: all probed
    assert not np.array_equal(draw_probes(u, ties, seed=0), draw_probes(u, ties, seed=1))


def test_isotonic_decreasing():
    y = np.array([1.0, 0.5, 0.9, 0.2, 0.3, 0.0])
    fit = isotonic_decreasing(y)
    assert np.all(np.diff(fit) <= 1e-12)
    assert fit.tolist() == pytest.approx([1.0, 0.7, 0.7, 0.25, 0.25, 0.0])


def test_isotonic_decreasing_agrees_with_scikit_learn():
    # ours is kept for a fit over a few dozen windows: 14 lines, where sklearn.isotonic costs the router a ~2 s import
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(0)
    for n in (1, 2, 9, 200):
        for y in (rng.random(n), rng.integers(0, 3, n).astype(float), np.sort(rng.random(n))):
            want = IsotonicRegression(increasing=False).fit_transform(np.arange(n), y)
            assert isotonic_decreasing(y) == pytest.approx(want, abs=1e-12)


def test_calibrate_thresholds():
    u = np.arange(20, dtype=float)
    pass_rate = np.where(u < 6, 1.0, np.where(u < 12, 0.5, 0.0))
    majority = np.where(u < 12, 1.0, 0.0)
    cal = calibrate(u, pass_rate, majority, window=4)
    # windows of 4: the last with pass rate >= 0.875 is probes 3..6 (1, 1, 1, 0.5: 0.875; median u 4.5);
    # the first with majority correctness < 0.5 is probes 10..13 (0.5 not < 0.5) -> 11..14 (median 12.5)
    assert cal["t_discard"] == 4.5 and cal["t_annotate"] == 12.5
    assert len(cal["curve"]["u"]) == 17
    assert calibrate(u, np.zeros(20), np.ones(20))["t_discard"] == -np.inf  # nothing easy: nothing discarded
    assert calibrate(u, np.zeros(20), np.ones(20))["t_annotate"] == np.inf  # majority always right: none annotated


def test_triage_route_and_budget():
    u = np.arange(10, dtype=float)
    ties = np.zeros(10, np.uint64)
    dec = triage_route(u, ties, probes=np.array([0, 5]), t_discard=2.0, t_annotate=7.0)
    assert dec.tolist() == [ANNOTATE, DISCARD, DISCARD, WEAK, WEAK, ANNOTATE, WEAK, ANNOTATE, ANNOTATE, ANNOTATE]
    capped = triage_route(u, ties, probes=np.array([0, 5]), t_discard=2.0, t_annotate=7.0, annotation_budget=4)
    assert capped.tolist() == [ANNOTATE, DISCARD, DISCARD, WEAK, WEAK, ANNOTATE, WEAK, WEAK, ANNOTATE, ANNOTATE]
    crossed = triage_route(u, ties, probes=np.array([], dtype=int), t_discard=8.0, t_annotate=5.0)
    assert crossed.tolist() == [DISCARD] * 5 + [ANNOTATE] * 5  # annotation wins where thresholds cross


def test_route_scores_triage_with_a_stand_in_annotator():
    n = 200
    rng = np.random.default_rng(0)
    u = rng.random(n)
    keys = [f"q{i:03d}" for i in range(n)]
    asked = []

    def oracle(idx):  # easy below u = 0.3, majority wrong above u = 0.7
        asked.extend(idx.tolist())
        return (u[idx] < 0.3).astype(float), (u[idx] < 0.7).astype(float), [f"a{i}" for i in idx]

    cfg = load_config(None, {"route.selector": "triage", "route.signal": "entropy", "route.min_probes": 40})
    dec, info = route_scores({"u_entropy": u}, keys, cfg, oracle)
    assert len(asked) == 40 and set(info["probe_keys"]) == {keys[i] for i in asked}
    t_d, t_a = info["thresholds"]["t_discard"], info["thresholds"]["t_annotate"]
    assert 0.15 < t_d < 0.35 and 0.65 < t_a < 0.85
    probe = np.zeros(n, bool)
    probe[asked] = True
    assert np.all(dec[probe] == ANNOTATE)
    assert np.all(dec[~probe & (u <= t_d)] == DISCARD) and np.all(dec[~probe & (u >= t_a)] == ANNOTATE)
    assert np.all(dec[~probe & (u > t_d) & (u < t_a)] == WEAK)
    # sign calibration on the probes: a score that ranks the wrong way round is flipped
    cfg = load_config(None, {"route.selector": "triage", "route.signal": "entropy", "route.min_probes": 40,
                             "route.calibrate_sign": True})
    _, info = route_scores({"u_entropy": -u}, keys, cfg, oracle)
    assert info["sign"] == -1 and info["calibration_on"] == "probes"
