"""GeoMin's rules against independent computations: the vMF log-normaliser (numeric integration over the
sphere, mpmath's Bessel function), kappa recovered from scipy's vMF sampler, the layer choice on hand-built
hidden states, the mixture posterior and the keep/reweight thresholds on hand-built affinities, and the
whole step through the house's StepRules."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate
from scipy.special import gammaln, ive
from scipy.stats import norm, vonmises_fisher

from refine_batches import exact_grade, geomin_batch, geomin_features

from devenus.online.config import ConfigError, config_from_dict
from devenus.online.refine.geomin import GeoMin, GeoMinConfig, affinity, keep_and_weight
from devenus.signals.mixture import reliable_posteriors
from devenus.signals.vmf import (
    estimate_kappa, fit_vmf, heldout_aurocs, log_bessel_iv, top_layers, unit_rows, vmf_log_normalizer)
from devenus.online.step import StepRules


# ------------------------------------------------------------------------------------------ vMF math
def log_c_by_integration(d: int, kappa: float) -> float:
    """-log of the integral of exp(kappa t) over S^{d-1}: |S^{d-2}| * int_{-1}^{1} e^{kappa t}(1-t^2)^{(d-3)/2} dt,
    with e^{kappa} factored out so the integrand stays in range."""
    log_area = math.log(2.0) + ((d - 1) / 2.0) * math.log(math.pi) - gammaln((d - 1) / 2.0)  # |S^{d-2}|
    val, _ = integrate.quad(lambda t: math.exp(kappa * (t - 1.0)) * (1.0 - t * t) ** ((d - 3) / 2.0), -1.0, 1.0,
                            limit=400, epsabs=0, epsrel=1e-12, points=[1.0 - 1.0 / max(kappa, 1.0)])
    return -(log_area + kappa + math.log(val))


@pytest.mark.parametrize("d", [3, 5, 10, 64])
@pytest.mark.parametrize("kappa", [0.0, 0.5, 5.0, 50.0, 500.0])
def test_log_normaliser_matches_integration_over_the_sphere(d, kappa):
    assert float(vmf_log_normalizer(d, kappa)) == pytest.approx(log_c_by_integration(d, kappa), abs=1e-7)


def test_log_normaliser_closed_form_in_three_dimensions():
    for k in (1e-3, 1.0, 30.0, 700.0):  # C_3 = kappa / (4 pi sinh kappa)
        ref = math.log(k) - math.log(4 * math.pi) - (k + math.log1p(-math.exp(-2 * k)) - math.log(2))
        assert float(vmf_log_normalizer(3, k)) == pytest.approx(ref, abs=1e-10)


def test_log_bessel_against_mpmath_including_where_ive_underflows():
    mpmath.mp.dps = 40
    underflowed = 0
    for v in (0.0, 0.5, 3.0, 31.0, 63.0, 255.0, 1023.0, 2047.0):
        for k in (1e-6, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4):
            underflowed += ive(v, k) == 0.0
            ref = float(mpmath.log(mpmath.besseli(v, k)))
            assert float(log_bessel_iv(v, k)) == pytest.approx(ref, rel=1e-9, abs=1e-9), (v, k)
    assert underflowed >= 5  # the large-order path is exercised, not only scipy's ive


@pytest.mark.parametrize("d", [64, 128, 1024, 4096])
def test_log_normaliser_is_finite_and_decreasing_at_high_dimension(d):
    kappas = np.concatenate([[0.0], np.logspace(-6, 4, 200)])
    c = vmf_log_normalizer(d, kappas)
    assert np.isfinite(c).all()
    assert (np.diff(c) <= 1e-9).all()  # the integral of exp(kappa mu.x) grows with kappa, so log C_d falls
    mpmath.mp.dps = 30
    for k in (1.0, 100.0, 1e4):  # mpmath at the high orders
        v = d / 2 - 1
        ref = v * math.log(k) - (d / 2) * math.log(2 * math.pi) - float(mpmath.log(mpmath.besseli(v, k)))
        assert float(vmf_log_normalizer(d, k)) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("d, kappa, n", [(10, 20.0, 20000), (128, 200.0, 5000), (512, 2000.0, 3000)])
def test_kappa_recovered_from_scipy_samples(d, kappa, n):
    mu = np.zeros(d)
    mu[0] = 1.0
    x = vonmises_fisher(mu, kappa).rvs(n, random_state=1)
    f = fit_vmf(x)
    assert f.kappa == pytest.approx(kappa, rel=0.03)
    assert float(f.mu @ mu) > 0.99
    # Newton moves Banerjee's approximation towards the MLE: A_d(kappa_hat) = R exactly
    from devenus.signals.vmf import mean_resultant_ratio

    r = float(np.linalg.norm(x.mean(axis=0)))
    assert mean_resultant_ratio(d, f.kappa) == pytest.approx(r, rel=1e-8)
    assert abs(mean_resultant_ratio(d, estimate_kappa(r, d, newton_steps=0)) - r) > 1e-9


def test_kappa_edge_cases_are_finite():
    assert estimate_kappa(0.0, 64) == 0.0
    assert estimate_kappa(1.0, 64) <= 1e6 and estimate_kappa(1.0, 64, max_kappa=50.0) == 50.0
    x = np.tile(np.eye(8)[0], (5, 1))  # identical rollouts: R = 1
    f = fit_vmf(x, max_kappa=1e4)
    assert f.kappa == 1e4 and np.isfinite(f.log_c) and np.isfinite(f.log_pdf(x)).all()


# ------------------------------------------------------------------------------------------ layers
def hand_built(n=40, layers=4, d=16, sep=2, seed=0):
    """(features (n, L, d) unit, correct): only layer ``sep`` separates correct from incorrect."""
    rng = np.random.default_rng(seed)
    correct = np.arange(n) % 2 == 0
    f = rng.normal(size=(n, layers, d))
    f[correct, sep, 0] += 4.0
    f[~correct, sep, 1] += 4.0
    return unit_rows(f), correct


def test_layer_choice_picks_the_separating_layer():
    f, correct = hand_built(sep=2)
    a = heldout_aurocs(f, correct)
    assert top_layers(a, 1) == [2] and a[2] > 0.95
    assert all(0.15 < a[i] < 0.85 for i in (0, 1, 3))
    assert top_layers(a, 3)[0] == 2 and len(top_layers(a, 3)) == 3
    assert top_layers([np.nan, 0.6, np.nan], 3) == [1]  # a layer without an AUROC is never chosen
    one_class = heldout_aurocs(f, np.ones(len(f), bool))
    assert np.isnan(one_class).all()


# ------------------------------------------------------------------------------------------ mixture
def test_affinity_formula():
    lm, lx = np.array([2.0, -1.0]), np.array([0.5])
    ref = np.mean([math.log(1 / (1 + math.exp(-2.0))), math.log(1 / (1 + math.exp(1.0)))]) + math.log(1 / (1 + math.exp(0.5)))
    assert affinity(lm, lx) == pytest.approx(ref, abs=1e-12)
    assert affinity(lm, np.array([])) == pytest.approx(ref - math.log(1 / (1 + math.exp(0.5))), abs=1e-12)
    assert np.isfinite(affinity(np.array([-1e4]), np.array([1e4])))  # no overflow


def test_mixture_posterior_is_the_reliable_component_and_thresholds_are_exact():
    rng = np.random.default_rng(0)
    vals = np.concatenate([-0.1 + 0.02 * rng.normal(size=20), -3.0 + 0.3 * rng.normal(size=20)])
    mix = reliable_posteriors(vals, seed=0)
    assert mix.means[0] > mix.means[1] and mix.means[0] == pytest.approx(-0.1, abs=0.05)
    assert (mix.posterior[:20] > 0.99).all() and (mix.posterior[20:] < 0.01).all()
    # the posterior is Bayes' rule over the fitted components (independent computation)
    p_hi = mix.weights[0] * norm.pdf(vals, mix.means[0], mix.stds[0])
    p_lo = mix.weights[1] * norm.pdf(vals, mix.means[1], mix.stds[1])
    np.testing.assert_allclose(mix.posterior, p_hi / (p_hi + p_lo), atol=1e-6)
    assert reliable_posteriors(np.full(5, -1.0)) is None  # one distinct value: nothing to fit
    keep, w = keep_and_weight(np.array([0.2, 0.3, 0.5, 0.50001, 0.6, 0.7, 0.9]), 0.5, 0.3, 0.7)
    assert keep.tolist() == [False, False, False, True, True, True, True]
    np.testing.assert_allclose(w, [1.0, 1.0, 0.5, 0.50001, 0.6, 1.0, 1.0])  # open band (0.3, 0.7)


def test_mixture_is_seeded():
    vals = np.random.default_rng(3).normal(size=30)
    assert np.array_equal(reliable_posteriors(vals, 7).posterior, reliable_posteriors(vals, 7).posterior)


# ------------------------------------------------------------------------------------------ the step
def run_step(method, batch, unreliable=("U7", "U8", "U9")):
    rules = StepRules(method, grade=exact_grade)
    t = rules.targets(batch)
    view = t.view
    view.token_stats = {"hidden_pooled": geomin_features(view, unreliable)}
    return rules.row_surfaces(view), view, rules


def test_step_admits_reliable_unlabeled_groups_and_every_labeled_one():
    m = GeoMin(GeoMinConfig(min_per_class=4, top_layers=1, min_mixture_points=4))
    out, view, rules = run_step(m, geomin_batch())
    keys = np.asarray(view.key)
    by_key = {k: bool(out.admit[keys == k][0]) for k in set(keys)}
    assert all(by_key[f"L{i}"] for i in range(3))
    assert all(by_key[f"U{i}"] for i in range(7)) and not any(by_key[k] for k in ("U7", "U8", "U9", "Utie"))
    assert (out.weight[np.asarray(view.labeled)] == 1.0).all() and ((out.weight >= 0) & (out.weight <= 1)).all()
    # admitted unlabeled groups train against their majority answer
    assert set(view.target[keys == "U0"]) == {"5"}
    metrics = m.pop_metrics()
    assert metrics["layer/chosen"] == 1 and metrics["auroc/chosen"] > 0.9
    assert metrics["admitted_share/unlabeled"] == pytest.approx(7 / 11)
    for k in ("mixture/weight_reliable", "mixture/mean_reliable", "mixture/mean_other", "auroc/best", "auroc/worst",
              "kappa/correct", "weight/mean", "admitted_share/labeled"):
        assert np.isfinite(metrics[k]), k
    assert metrics["mixture/mean_reliable"] > metrics["mixture/mean_other"]
    ev = m.pop_evidence()
    assert len(ev) == 14 and all("affinity" in e["values"] for e in ev)
    assert rules.metrics["devenus/groups/admitted"] == 10
    # every unlabeled group with a majority got a posterior: judged; the tie had nothing to judge
    judged = m.admission_judged(view)
    assert judged[keys == "U8"].all() and not judged[keys == "Utie"].any() and judged[np.asarray(view.labeled)].all()


def test_not_ready_trains_labeled_rows_only():
    for cfg in (GeoMinConfig(warmup_steps=1, min_per_class=4, min_mixture_points=4),  # warm-up
                GeoMinConfig(min_per_class=13, min_mixture_points=4),  # too few labeled rollouts per class
                GeoMinConfig(min_per_class=4, min_mixture_points=100)):  # too few affinities for the mixture
        m = GeoMin(cfg)
        out, view, _ = run_step(m, geomin_batch(step=1))
        assert (out.admit == np.asarray(view.labeled)).all(), cfg
        assert m.pop_metrics()["ready"] == 0.0
        # dropped without a decision: the mechanism meter counts them apart from the rejected groups
        assert (m.admission_judged(view) == np.asarray(view.labeled)).all(), cfg


def test_buffer_carries_affinities_and_state_round_trips():
    cfg = GeoMinConfig(min_per_class=4, top_layers=2, min_mixture_points=4, buffer_size=12)
    a = GeoMin(cfg)
    run_step(a, geomin_batch(step=1))
    assert len(a.buffer) == 10 and a.layers and a.mean_count == 8 * 14
    b = GeoMin(cfg)
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict()
    # a layer without a held-out AUROC (NaN) survives a save through pickle (the checkpoint) and still compares equal
    import pickle

    a.aurocs = [*a.aurocs[:-1], float("nan")]
    c = GeoMin(cfg)
    c.load_state_dict(pickle.loads(pickle.dumps(a.state_dict())))
    assert c.state_dict() == a.state_dict() and math.isnan(c.aurocs[-1])
    out_a, _, _ = run_step(a, geomin_batch(step=2))
    out_b, _, _ = run_step(b, geomin_batch(step=2))
    assert np.array_equal(out_a.admit, out_b.admit) and np.array_equal(out_a.weight, out_b.weight)
    assert len(a.buffer) == 12  # bounded
    assert a.pop_metrics()["mixture/points"] == 20


def test_a_group_with_no_rollout_in_its_majority_has_no_affinity_and_is_not_admitted():
    assert affinity(np.array([]), np.array([0.5, -1.0])) is None
    assert affinity(np.array([]), np.array([])) is None
    m = GeoMin(GeoMinConfig(min_per_class=4, top_layers=1, min_mixture_points=4))
    batch = geomin_batch()
    odd = np.flatnonzero(np.asarray(batch.key) == "U0")
    for i in odd:  # the vote says "5" but the grader scores no response of the group correct against it
        batch.response[i] = "unparseable"
    out, view, _ = run_step(m, batch)
    keys = np.asarray(view.key)
    assert not out.admit[keys == "U0"].any() and out.admit[keys == "U1"].all()
    assert len(m.buffer) == 9 and m.pop_metrics()["scored_groups"] == 9  # the mixture fitted without it
    (row,) = [e for e in m.pop_evidence() if e["key"] == "U0"]
    assert row["values"]["affinity"] is None and row["values"]["posterior"] is None and not row["values"]["admitted"]


def test_the_mixture_refuses_non_finite_values():
    with pytest.raises(ValueError, match="finite"):
        reliable_posteriors(np.array([0.1, np.nan, 0.3, 0.4]))


def test_missing_hidden_states_name_the_engine_extension():
    m = GeoMin(GeoMinConfig())
    rules = StepRules(m, grade=exact_grade)
    view = rules.targets(geomin_batch()).view
    with pytest.raises(KeyError, match="engine extension"):
        rules.row_surfaces(view)


def test_config_errors():
    with pytest.raises(ConfigError, match="band_low"):
        GeoMinConfig(band_low=0.7, band_high=0.3)
    with pytest.raises(ConfigError, match="min_per_class"):
        GeoMinConfig(min_per_class=1)
    with pytest.raises(ConfigError, match="did you mean .*top_layers"):
        config_from_dict(GeoMinConfig, {"top_layer": 2}, "geomin")
    with pytest.raises(ConfigError, match="keep_above"):
        config_from_dict(GeoMinConfig, {"keep_above": 1.5}, "geomin")
    assert GeoMin().step_needs == frozenset({"hidden_pooled"}) and StepRules(GeoMin()).after_log_prob
