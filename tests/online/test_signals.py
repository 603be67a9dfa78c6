"""The shared signals: token statistics, sequence aggregation, group normalisation (pure, no verl)."""

import math

import numpy as np
import pytest
import torch

from devenus import signals as C
from devenus.signals.tokens import BUFFERS


def direct_self_certainty(logits, temperature=1.0):
    """KL(U || p) over the full vocabulary, written out from the definition (float64)."""
    z = logits.double() / temperature
    logp = torch.log_softmax(z, dim=-1)
    V = z.shape[-1]
    return (1.0 / V * (math.log(1.0 / V) - logp)).sum(-1)


def direct_entropy(logits, temperature=1.0):
    logp = torch.log_softmax(logits.double() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


@pytest.fixture
def logits():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 17, 384, generator=g) * 4  # [rows, tokens, V] with V a padded width


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_self_certainty_and_entropy_match_full_vocab_definitions(logits, temperature):
    stats = C.token_stats_from_logits(logits, chunk_size=5, temperature=temperature)
    assert stats["self_certainty"].shape == logits.shape[:-1]
    torch.testing.assert_close(stats["self_certainty"].double(), direct_self_certainty(logits, temperature),
                               atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(stats["entropy"].double(), direct_entropy(logits, temperature), atol=1e-4, rtol=1e-5)


def test_chunked_equals_unchunked(logits):
    whole = C.token_stats_from_logits(logits, chunk_size=10_000)
    for chunk in (1, 7, 51):
        part = C.token_stats_from_logits(logits, chunk_size=chunk)
        for k in whole:
            torch.testing.assert_close(part[k], whole[k], atol=1e-6, rtol=0)
    assert torch.equal(C.self_certainty_from_logits(logits, 7), whole["self_certainty"])
    assert torch.equal(C.entropy_from_logits(logits, 7), whole["entropy"])


def test_extremes_use_logits_width_not_tokenizer_size():
    V = 384
    uniform = torch.zeros(1, V)
    onehot = torch.full((1, V), -1e4)
    onehot[0, 3] = 0.0
    assert C.self_certainty_from_logits(uniform).item() == pytest.approx(0.0, abs=1e-6)
    assert C.entropy_from_logits(uniform).item() == pytest.approx(math.log(V), abs=1e-5)
    assert C.entropy_from_logits(onehot).item() == pytest.approx(0.0, abs=1e-5)
    # KL(U || one-hot-ish) grows with the logit gap; it is >= 0 and ordered with confidence
    assert C.self_certainty_from_logits(onehot).item() > C.self_certainty_from_logits(torch.randn(1, V)).item() > 0


def test_per_token_temperature_and_dtype():
    z = torch.randn(2, 4, 50)
    t = torch.tensor([[0.5], [2.0]])  # per row, broadcast over tokens
    got = C.self_certainty_from_logits(z, chunk_size=3, temperature=t)
    want = torch.stack([direct_self_certainty(z[0], 0.5), direct_self_certainty(z[1], 2.0)])
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    half = C.self_certainty_from_logits(z.bfloat16())
    assert half.dtype == torch.float32
    with pytest.raises(ValueError):
        C.token_stats_from_logits(z, which=("perplexity",))
    with pytest.raises(ValueError):
        C.token_stats_from_logits(z, chunk_size=0)


def test_sequence_aggregation_over_ragged_masks():
    vals = torch.tensor([[1.0, 2.0, 3.0, 99.0], [4.0, 99.0, 99.0, 99.0], [99.0, 99.0, 99.0, 99.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    mean = C.masked_mean(vals, mask)
    assert mean[:2].tolist() == [2.0, 4.0] and np.isnan(mean[2])
    s = C.masked_sum(vals, mask)
    assert s[:2].tolist() == [6.0, 4.0] and np.isnan(s[2])
    assert C.mean_self_certainty(vals, mask)[0] == 2.0
    assert C.negative_mean_entropy(vals, mask)[0] == -2.0
    assert C.mean_log_prob(-vals, mask)[1] == -4.0
    assert C.sum_log_prob(-vals, mask)[0] == -6.0
    with pytest.raises(ValueError):
        C.masked_sum(vals, mask[:, :2])


def test_group_normalize_modes_and_nan():
    v = np.array([1.0, 2.0, 3.0, 5.0, 5.0, np.nan, 7.0])
    g = np.array(["a", "a", "a", "b", "b", "b", "c"])
    z = C.group_normalize(v, g)
    assert z[:3] == pytest.approx([-1.2247, 0.0, 1.2247], abs=1e-3)
    assert z[3:5].tolist() == [0.0, 0.0] and np.isnan(z[5]) and z[6] == 0.0
    assert C.group_normalize(v, g, "center")[:3].tolist() == [-1.0, 0.0, 1.0]
    r = C.group_normalize(np.array([3.0, 1.0, 3.0, 2.0]), np.zeros(4), "rank")
    assert r.tolist() == [pytest.approx(5 / 6), 0.0, pytest.approx(5 / 6), pytest.approx(1 / 3)]
    assert C.group_normalize(np.array([4.0]), np.array([0]), "rank").tolist() == [0.5]
    with pytest.raises(ValueError):
        C.group_normalize(v, g, "softmax")


def test_auroc():
    assert C.auroc([0.1, 0.9, 0.8, 0.2], [False, True, True, False]) == 1.0
    assert C.auroc([0.5, 0.5], [True, False]) == 0.5
    assert np.isnan(C.auroc([0.1, 0.2], [True, True]))


def test_auroc_agrees_with_scikit_learn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    for n in (2, 7, 100, 5000):
        s = rng.integers(0, 6, n).astype(float)  # many ties
        s[rng.random(n) < 0.1] = np.nan
        y = rng.random(n) < 0.3
        keep = ~np.isnan(s)
        if 0 < y[keep].sum() < keep.sum():
            assert C.auroc(s, y) == pytest.approx(roc_auc_score(y[keep], s[keep]), abs=1e-12)
        s = rng.normal(size=n)
        y[:2] = [True, False]
        assert C.auroc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_auroc_interval_is_a_seeded_percentile_bootstrap_over_rows():
    # perfectly separated rows: every resample with both classes is separated too
    assert C.auroc_interval([0.1, 0.2, 0.8, 0.9], [False, False, True, True], boot=200) == (1.0, 1.0, 1.0)
    assert all(np.isnan(C.auroc_interval([0.1, 0.2], [True, True])))  # one class: undefined
    rng = np.random.default_rng(1)
    y = rng.random(300) < 0.3
    s = y + rng.normal(size=300)  # informative but noisy
    auc, lo, hi = C.auroc_interval(s, y, boot=500, seed=3)
    assert auc == C.auroc(s, y) and lo < auc < hi and 0.5 < lo and hi - lo < 0.2
    assert C.auroc_interval(s, y, boot=500, seed=3) == (auc, lo, hi)  # seeded: reproducible
    assert C.auroc_interval(s, y, boot=500, seed=4) != (auc, lo, hi)
    # by hand: the same resampling loop
    r = np.random.default_rng(3)
    b = [C.auroc(s[i], y[i]) for i in (r.integers(0, 300, 300) for _ in range(500))]
    assert (lo, hi) == tuple(np.percentile(b, [2.5, 97.5]))


def test_collapse_monitor_warns_when_length_halves_while_confidence_rises():
    m = C.CollapseMonitor(baseline_steps=2, length_ratio=0.5)
    assert m.update(100, 1.0)["collapse_warning"] == 0  # baseline
    assert m.update(80, 1.1)["collapse_warning"] == 0  # baseline (mean 90)
    assert m.update(60, 1.2)["collapse_warning"] == 0  # not short enough
    out = m.update(40, 1.3)  # < 45 and rising
    assert out["collapse_warning"] == 1 and out["length_vs_baseline"] == pytest.approx(40 / 90)
    assert m.update(30, 1.2)["collapse_warning"] == 0  # short but confidence fell
    restored = C.CollapseMonitor(2, 0.5)
    restored.load_state_dict(m.state_dict())
    assert restored.update(20, 1.25) == m.update(20, 1.25)


@pytest.mark.parametrize("vocab", [49_152, 151_936])  # SmolLM2's and Qwen2.5/3's logits widths
@pytest.mark.parametrize("dtype,temperature", [(torch.float32, 1.0), (torch.float32, 0.7), (torch.bfloat16, 0.7)])
def test_budgeted_chunks_equal_one_chunk_at_real_vocabulary_width(vocab, dtype, temperature):
    g = torch.Generator().manual_seed(1)
    z = (torch.randn(9, vocab, generator=g) * 3).to(dtype)
    whole = C.token_stats_from_logits(z, chunk_size=9, temperature=temperature, budget_bytes=2**40)
    # a budget for 2 tokens per chunk (the last chunk a single token), and the adapter's defaults
    tiny = C.token_stats_from_logits(z, temperature=temperature, budget_bytes=2 * vocab * 4 * BUFFERS)
    default = C.token_stats_from_logits(z, temperature=temperature)
    for k in whole:
        assert torch.equal(tiny[k], whole[k]), k
        assert torch.equal(default[k], whole[k]), k


def test_chunk_from_budget_keeps_the_vocabulary_wide_temporaries_under_it():
    for vocab in (384, 49_152, 151_936, 256_000):
        rows = C.chunk_rows(vocab)
        assert rows * vocab * 4 * BUFFERS <= C.DEFAULT_BUDGET_BYTES or rows == 1
        assert (rows + 1) * vocab * 4 * BUFFERS > C.DEFAULT_BUDGET_BYTES or rows == C.DEFAULT_CHUNK_SIZE
    assert C.chunk_rows(151_936) == 73  # 3 x 73 x 151,936 x 4 B = 133 MB < 256 MB at any T
    assert C.chunk_rows(384) == C.DEFAULT_CHUNK_SIZE  # a small vocabulary: the cap binds
    assert C.chunk_rows(151_936, chunk_size=8) == 8
    assert C.chunk_rows(10**9, budget_bytes=1) == 1  # never zero tokens
    with pytest.raises(ValueError):
        C.chunk_rows(100, budget_bytes=0)


def test_kernel_holds_no_more_than_its_counted_temporaries():
    """Every V-wide tensor the kernel allocates (views aside) is one chunk wide: none spans the tokens."""
    from torch.utils._python_dispatch import TorchDispatchMode

    vocab, rows = 151_936, 4
    budget = rows * vocab * 4 * BUFFERS
    z = torch.randn(3 * rows, vocab, dtype=torch.bfloat16)
    seen = []

    class Probe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor) and t.shape[-1:] == (vocab,) \
                        and t.untyped_storage().data_ptr() != z.untyped_storage().data_ptr():  # not a view of z
                    seen.append(t.numel() * t.element_size())
            return out

    with Probe():
        C.token_stats_from_logits(z, temperature=0.7, budget_bytes=budget)
    assert seen and max(seen) <= rows * vocab * 4  # every V-wide temporary is one chunk's width
