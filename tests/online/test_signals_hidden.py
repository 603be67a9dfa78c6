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


def _massive_bf16_states(layers=6, b=2, t=512, d=64):
    """bf16 hidden states whose residual stream carries two "massive activation" channels (~1e3, as in
    Qwen/Llama), with layer-to-layer changes of order 1 in the others; a token mask per sequence."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(b, t, d, generator=g)
    states = []
    for layer in range(layers):
        h = base + 0.3 * layer * torch.randn(b, t, d, generator=g)
        h[..., [3, 17]] += torch.tensor([1500.0, -900.0]) * (1 + 0.01 * layer)
        states.append(h.to(torch.bfloat16))
    mask = torch.zeros(b, t, dtype=torch.bool)
    mask[0, t // 5: 4 * t // 5] = True
    mask[1, :] = True
    return states, mask


def test_bf16_pooling_with_massive_activations_matches_float64():
    """The pooled means (and CoE on them) of bf16 states agree with the float64 mean of the same bf16
    values to fp32 precision. Pooling in the model's dtype (the old einsum in bf16) was off by 3.7 on the
    massive channels and moved CoE-R by 0.88 and CoE-C by 0.034 here: measured below, so this test fails
    if pooling ever goes back to bf16."""
    states, mask = _massive_bf16_states()
    ref = torch.stack([torch.stack([s[b][mask[b]].double().mean(0) for b in range(len(mask))]) for s in states], 1)
    pool = LayerPool(mask)
    for i, s in enumerate(states):
        pool.add(i, s)
    got = pool.means()
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)
    old = torch.stack([torch.einsum("bt,btd->bd", mask.to(torch.bfloat16), s).double() for s in states], 1)
    old = old / mask.sum(1).double()[:, None, None]
    assert (old - ref).abs().max() > 1.0  # the bf16 rounding the fp32 sum removes
    want, new, before = coe_scores(ref), coe_scores(got), coe_scores(old)
    for name in ("coe_r", "coe_c"):
        torch.testing.assert_close(new[name], want[name], rtol=1e-6, atol=1e-7)
        assert (before[name] - want[name]).abs().max() > 1e-2, name


def test_kinetics_of_bf16_states_matches_float64_reference():
    """CoT-Kinetics works on a bf16 model's states in fp32 (not bf16, not float64): it agrees with the
    float64 reference on the same bf16 values to fp32 precision."""
    from devenus.signals.hidden import KineticsPool

    states, mask = _massive_bf16_states(layers=5, t=64)
    pool = KineticsPool(mask)
    for i, s in enumerate(states):
        pool.add(i, s)
    got = pool.energy()
    assert got.dtype == torch.float64 and pool.prev.dtype == torch.float32
    for b in range(len(mask)):
        want = kinetics_reference([s[b].double().numpy() for s in states], mask[b].numpy())
        assert got[b].item() == pytest.approx(want, rel=1e-5)
    before = [s.clone() for s in states]
    pool2 = KineticsPool(mask)
    for i, s in enumerate(states):
        pool2.add(i, s.float())
    assert all(torch.equal(a, b) for a, b in zip(states, before))  # the model's tensors are never written
