"""Layer pooling and CoE against the reference definition in methods.md, computed independently
(numpy, complex numbers, an explicit loop over layers) on the same hidden states."""

import cmath
import math

import numpy as np
import pytest
import torch

from devenus.signals.hidden import LayerPool, coe_scores
from devenus.signals import auroc


def coe_reference(h: np.ndarray) -> tuple[float, float]:
    """methods.md: M_l = ||h_{l+1}-h_l|| / ||h_L-h_0||; A_l = arccos(cos(h_{l+1},h_l)) / arccos(cos(h_L,h_0));
    CoE-R = mean M - mean A; CoE-C = |mean_l M_l e^{i A_l}|."""
    def ang(x, y):
        return math.acos(max(-1.0, min(1.0, float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))))))

    big_l = len(h) - 1
    ms = [np.linalg.norm(h[l + 1] - h[l]) / np.linalg.norm(h[big_l] - h[0]) for l in range(big_l)]
    as_ = [ang(h[l + 1], h[l]) / ang(h[big_l], h[0]) for l in range(big_l)]
    r = sum(ms) / big_l - sum(as_) / big_l
    c = abs(sum(m * cmath.exp(1j * a) for m, a in zip(ms, as_)) / big_l)
    return r, c


def test_coe_matches_reference():
    rng = np.random.default_rng(0)
    pooled = rng.normal(size=(5, 7, 12))  # 5 sequences, L+1 = 7 layers of states, d = 12
    out = coe_scores(torch.tensor(pooled))
    for b in range(5):
        r, c = coe_reference(pooled[b])
        assert out["coe_r"][b].item() == pytest.approx(r, rel=1e-9)
        assert out["coe_c"][b].item() == pytest.approx(c, rel=1e-9)


def test_layer_pool_is_the_masked_mean():
    g = torch.Generator().manual_seed(1)
    states = [torch.randn(3, 9, 8, generator=g) for _ in range(4)]
    mask = torch.zeros(3, 9, dtype=torch.bool)
    mask[0, 2:5] = True
    mask[1, 8] = True
    mask[2, :] = True
    pool = LayerPool(mask)
    for i, s in enumerate(states):
        pool.add(i, s)
    got = pool.means()
    assert got.shape == (3, 4, 8)
    for b in range(3):
        for i, s in enumerate(states):
            want = s[b][mask[b]].double().mean(0)
            torch.testing.assert_close(got[b, i], want)
    with pytest.raises(ValueError, match="twice"):
        pool.add(0, states[0])


def pairwise_auroc(s, y) -> float:
    """AUROC by its definition: P(score of a positive > score of a negative), ties counting half."""
    keep = ~np.isnan(s)
    pos, neg = s[keep & y], s[keep & ~y]
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def test_rank_auroc_matches_the_pairwise_form():
    rng = np.random.default_rng(2)
    for _ in range(20):
        s = rng.integers(0, 6, size=40).astype(float)  # many ties
        s[rng.integers(0, 40)] = np.nan
        y = rng.random(40) < 0.4
        assert auroc(s, y) == pytest.approx(pairwise_auroc(s, y), abs=1e-12)
    assert math.isnan(auroc([1.0, 2.0], [True, True]))


def kinetics_reference(states: np.ndarray, mask: np.ndarray, g: float = 0.8) -> float:
    """methods.md CoT-Kinetics, per token and layer in plain loops: unit-normalised states, v_l = x_{l+1} - x_l,
    K = mean ||v_l||^2, C = mean (1 - cos(v_l, v_{l+1})), E = g K + (1 - g) C, mean over masked tokens."""
    energies = []
    for t in np.flatnonzero(mask):
        x = [s[t] / np.linalg.norm(s[t]) for s in states]
        v = [x[l + 1] - x[l] for l in range(len(x) - 1)]
        k = sum(float(vi @ vi) for vi in v) / len(v)
        c = sum(1 - float(v[l] @ v[l + 1]) / (np.linalg.norm(v[l]) * np.linalg.norm(v[l + 1])) for l in range(len(v) - 1)) / (len(v) - 1)
        energies.append(g * k + (1 - g) * c)
    return float(np.mean(energies))


def test_kinetics_matches_reference():
    from devenus.signals.hidden import KineticsPool

    rng = np.random.default_rng(3)
    states = [rng.normal(size=(2, 6, 5)) for _ in range(5)]  # L+1 = 5 layers, B = 2, T = 6, d = 5
    mask = np.zeros((2, 6), bool)
    mask[0, 1:4] = True
    mask[1, 5] = True
    pool = KineticsPool(torch.tensor(mask))
    for i, s in enumerate(states):
        pool.add(i, torch.tensor(s))
    got = pool.energy()
    for b in range(2):
        assert got[b].item() == pytest.approx(kinetics_reference([s[b] for s in states], mask[b]), rel=1e-9)
    with pytest.raises(ValueError, match="in order"):
        pool.add(9, torch.tensor(states[0]))
