"""PivotTrace's pieces against independent computations: the far-back attention mass (query-chunked,
GQA) against full softmax attention maps; pivots against a hand-worked example."""

import numpy as np
import pytest
import torch

from devenus.signals.attention import far_attention_mass, pivot_count


def reference_mass(q, k, key_mask, window):
    b, hq, t, d = q.shape
    group = hq // k.shape[1]
    out = np.zeros((b, t))
    for bi in range(b):
        for h in range(hq):
            kh = k[bi, h // group].double()
            for i in range(t):
                if not key_mask[bi, i]:
                    continue
                keys = [j for j in range(i + 1) if key_mask[bi, j]]
                s = torch.stack([q[bi, h, i].double() @ kh[j] for j in keys]) / d ** 0.5
                p = torch.softmax(s, 0)
                out[bi, i] += sum(float(p[n]) for n, j in enumerate(keys) if j < i - window and j > 0) / hq
    return out


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_far_mass_matches_full_attention(chunk):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 11, 8, generator=g)
    k = torch.randn(2, 2, 11, 8, generator=g)  # GQA: 2 query heads per key head
    key_mask = torch.ones(2, 11, dtype=torch.long)
    key_mask[1, 8:] = 0  # right padding
    got = far_attention_mass(q, k, key_mask, window=3, chunk=chunk)
    want = reference_mass(q, k, key_mask, 3)
    valid = key_mask.bool().numpy()
    np.testing.assert_allclose(got.numpy()[valid], want[valid], atol=1e-6)
    assert float(got[0, :4].abs().max()) == 0.0  # nothing more than 3 back (and never the sink)


def test_pivot_count():
    mass = np.zeros(40)
    starts = [0, 5, 10, 15, 20, 25]
    mass[0:5], mass[5:10], mass[10:15] = 0.1, 0.12, 0.11
    mass[15:20] = 0.5  # a jump: a pivot
    mass[20:25], mass[25:] = 0.1, 0.11
    assert pivot_count(mass, starts, first=8, history=8, z=2.0) == 1
    assert pivot_count(mass, starts[:2]) == 0  # fewer than 3 steps: no history to compare with
    # only the first `first` tokens of a step count
    mass2 = np.full(40, 0.1)
    mass2[[1, 6, 11]] += [0.01, -0.01, 0.0]
    mass2[17:20] = 0.9
    assert pivot_count(mass2, [0, 5, 10, 15, 20], first=2) == 0
    assert pivot_count(mass2, [0, 5, 10, 15, 20], first=5) == 1


def test_pivot_density_is_pivots_per_thousand_response_tokens():
    from devenus.signals.attention import pivot_density

    mass = np.zeros(40)
    starts = [0, 5, 10, 15, 20, 25]
    mass[0:5], mass[5:10], mass[10:15], mass[15:20], mass[20:25], mass[25:] = 0.1, 0.12, 0.11, 0.5, 0.1, 0.11
    assert pivot_density(mass, starts) == pytest.approx(1 * 1000 / 40)  # one pivot in 40 tokens
    # the same pivot in a response twice as long (quiet steps appended) is half as dense; the count is not
    longer = np.r_[mass, np.full(40, 0.11)]
    longer_starts = starts + [40, 45, 50, 55, 60, 65, 70, 75]
    assert pivot_count(longer, longer_starts) == pivot_count(mass, starts) == 1
    assert pivot_density(longer, longer_starts) == pytest.approx(0.5 * pivot_density(mass, starts))
    assert pivot_density(np.full(10, 0.1), [0, 5]) == 0.0  # no pivot
    assert np.isnan(pivot_density([], [0]))  # no response: no density
