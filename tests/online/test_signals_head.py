"""Token statistics from hidden states through the head, chunked over tokens and vocabulary, against
an independent computation on the full logits (log-softmax; KL(U || p) written out)."""

import math

import pytest
import torch

from devenus.signals.head import token_stats_from_hidden


def reference(hidden, weight, bias, temperature):
    z = (hidden.double() @ weight.double().T + (0 if bias is None else bias.double())) / temperature
    logp = torch.log_softmax(z, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    v = z.shape[-1]
    kl_uniform = (-(math.log(v)) - logp.mean(-1))  # sum_j (1/V) log((1/V) / p_j)
    return entropy, kl_uniform


@pytest.mark.parametrize("token_chunk,vocab_chunk", [(1, 1000), (7, 13), (64, 97), (512, 8192)])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_matches_full_logits(token_chunk, vocab_chunk, temperature):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 11, 16, generator=g)
    weight = torch.randn(389, 16, generator=g) * 2
    bias = torch.randn(389, generator=g)
    out = token_stats_from_hidden(hidden, weight, bias, temperature=temperature, token_chunk=token_chunk,
                                  vocab_chunk=vocab_chunk)
    h, sc = reference(hidden, weight, bias, temperature)
    assert out["entropy"].shape == (3, 11)
    torch.testing.assert_close(out["entropy"].double(), h, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(out["self_certainty"].double(), sc, atol=2e-5, rtol=1e-5)


def test_peaked_distribution_is_stable():
    # one logit far above the rest: the running max must rescale, not overflow
    hidden = torch.eye(4)
    weight = torch.zeros(1000, 4)
    weight[999, 0] = 500.0
    weight[3, 1] = -500.0
    out = token_stats_from_hidden(hidden, weight, vocab_chunk=100)
    assert torch.isfinite(out["entropy"]).all() and torch.isfinite(out["self_certainty"]).all()
    assert out["entropy"][0] == pytest.approx(0.0, abs=1e-6)
    assert out["entropy"][2] == pytest.approx(math.log(1000), rel=1e-6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="hidden size"):
        token_stats_from_hidden(torch.zeros(2, 3), torch.zeros(5, 4))
    with pytest.raises(ValueError, match="temperature"):
        token_stats_from_hidden(torch.zeros(2, 4), torch.zeros(5, 4), temperature=0)
