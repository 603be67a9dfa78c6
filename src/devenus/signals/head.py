"""Token statistics straight from hidden states and the output head, chunked over tokens AND vocabulary.

:func:`devenus.signals.token_stats_from_logits` needs the logits ``[T, V]`` to exist; for offline
scoring of long responses with a 151,936-wide vocabulary that is 0.6 GB per 1k tokens before any
statistic is taken. Here the logits are never formed: for each chunk of ``token_chunk`` final hidden
states, the head is applied to ``vocab_chunk`` rows of its weight at a time and an online
(streaming) logsumexp keeps, per token, the running max ``m``, ``s = sum exp(z - m)``,
``a = sum exp(z - m) * z`` and ``b = sum z``. Then

- ``logsumexp(z) = m + log s``
- entropy ``H = logsumexp(z) - a / s``                      (= ``logsumexp(z) - sum_j p_j z_j``)
- self-certainty ``SC = logsumexp(z) - b / V - log V``      (= ``KL(U || p)``)

the same definitions as :mod:`devenus.signals.tokens`. Working memory: a few
``[token_chunk, vocab_chunk]`` float32 buffers (about 3; 3 x 512 x 8192 x 4 B = 50 MB at the
defaults), independent of the response length and of V.
"""

from __future__ import annotations

import math

import torch

DEFAULT_TOKEN_CHUNK = 512
DEFAULT_VOCAB_CHUNK = 8192


def token_stats_from_hidden(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    temperature: float = 1.0,
    token_chunk: int = DEFAULT_TOKEN_CHUNK,
    vocab_chunk: int = DEFAULT_VOCAB_CHUNK,
) -> dict[str, torch.Tensor]:
    """Entropy and self-certainty of ``softmax((hidden @ weight.T + bias) / temperature)`` per token.

    Args:
        hidden: final hidden states ``[..., d]`` (what the head reads).
        weight: the head's weight ``[V, d]`` (``lm_head.weight``); ``bias``: ``[V]`` or None.
        temperature: divides the logits first (> 0).
        token_chunk, vocab_chunk: chunk sizes (tokens, vocabulary rows).

    Returns:
        ``{"entropy": ..., "self_certainty": ...}``, float32 of shape ``hidden.shape[:-1]``.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if token_chunk < 1 or vocab_chunk < 1:
        raise ValueError(f"chunk sizes must be >= 1, got token_chunk={token_chunk}, vocab_chunk={vocab_chunk}")
    lead, d = hidden.shape[:-1], hidden.shape[-1]
    if weight.shape[-1] != d:
        raise ValueError(f"head weight {tuple(weight.shape)} does not match hidden size {d}")
    flat = hidden.reshape(-1, d)
    n, vocab = flat.shape[0], weight.shape[0]
    ent = torch.empty(n, dtype=torch.float32, device=hidden.device)
    sc = torch.empty(n, dtype=torch.float32, device=hidden.device)
    inv_t = 1.0 / float(temperature)
    with torch.no_grad():
        for t0 in range(0, n, token_chunk):
            h = flat[t0:t0 + token_chunk].to(weight.dtype)
            rows = h.shape[0]
            m = torch.full((rows,), -math.inf, dtype=torch.float32, device=h.device)
            s = torch.zeros(rows, dtype=torch.float32, device=h.device)
            a = torch.zeros_like(s)
            b = torch.zeros_like(s)
            for v0 in range(0, vocab, vocab_chunk):
                w = weight[v0:v0 + vocab_chunk]
                z = torch.nn.functional.linear(h, w, None if bias is None else bias[v0:v0 + vocab_chunk]).float()
                if inv_t != 1.0:
                    z.mul_(inv_t)
                b += z.sum(dim=-1)
                m_new = torch.maximum(m, z.amax(dim=-1))
                scale = torch.exp(m - m_new)  # rescale what was summed against the old max
                e = torch.exp(z - m_new[:, None])
                s = s * scale + e.sum(dim=-1)
                a = a * scale + (e.mul_(z)).sum(dim=-1)
                m = m_new
                del z, e
            lse = m + torch.log(s)
            ent[t0:t0 + rows] = lse - a / s
            sc[t0:t0 + rows] = lse - b / vocab - math.log(vocab)
    return {"entropy": ent.reshape(lead), "self_certainty": sc.reshape(lead)}
