"""Token-level statistics of a model's next-token distributions, from its logits.

For logits ``z_t`` of width V (the logits dimension, which may exceed the tokenizer's size):

- self-certainty ``SC_t = KL(U || p_t) = logsumexp(z_t) - mean_j z_t,j - log V``: 0 for a uniform
  distribution, and unbounded above (it grows with the gap between the largest logit and the mean:
  a testbed token reached 6.50 against log V = 5.95; one logit raised by 80 gives about 73);
- entropy ``H(p_t) = logsumexp(z_t) - sum_j p_t,j z_t,j`` (full vocabulary), in [0, log V].

Both are computed in chunks of ``chunk_size`` tokens, so the working memory is a few ``[chunk, V]``
float32 buffers, never ``[tokens, V]`` for a whole long response. How many: the float32 copy of the
chunk, one more when a temperature divides it (or the input is not float32 already), and one more for
the softmax when entropy is asked for (measured: 0.6 / 1.2 / 1.8 GB at chunk 1024, V = 151,936).
Lower ``chunk_size`` to bound it further.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

DEFAULT_CHUNK_SIZE = 1024
TOKEN_STATS = ("self_certainty", "entropy")


def _per_token(temperature, lead_shape: torch.Size, device) -> torch.Tensor | None:
    """Temperature as one value per token (flattened), or None for temperature 1."""
    if temperature is None:
        return None
    if not isinstance(temperature, torch.Tensor):
        t = float(temperature)
        if t == 1.0:
            return None
        if t <= 0:
            raise ValueError(f"temperature must be positive, got {t}")
        return torch.full((math.prod(lead_shape),), t, device=device, dtype=torch.float32)
    return torch.broadcast_to(temperature.to(device=device, dtype=torch.float32), lead_shape).reshape(-1)


def token_stats_from_logits(
    logits: torch.Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    temperature: float | torch.Tensor | None = None,
    which: Sequence[str] = TOKEN_STATS,
) -> dict[str, torch.Tensor]:
    """Per-token statistics of ``logits`` ``[..., V]``, chunked over the tokens (leading dims).

    Args:
        logits: raw logits; any float dtype (each chunk is computed in float32).
        chunk_size: tokens per chunk.
        temperature: divides the logits first (a scalar, or a tensor broadcastable to ``logits.shape[:-1]``).
        which: any of ``"self_certainty"``, ``"entropy"``.

    Returns:
        ``{name: float32 tensor of shape logits.shape[:-1]}``.
    """
    unknown = set(which) - set(TOKEN_STATS)
    if unknown:
        raise ValueError(f"unknown token statistics {sorted(unknown)}; known: {list(TOKEN_STATS)}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    flat = logits.reshape(-1, vocab)  # a view for contiguous logits (what a model returns)
    temp = _per_token(temperature, lead, logits.device)
    n = flat.shape[0]
    out = {k: torch.empty(n, dtype=torch.float32, device=logits.device) for k in which}
    log_v = math.log(vocab)
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        z = flat[start:stop].float()
        if temp is not None:
            z = z / temp[start:stop, None].clamp(min=1e-8)
        lse = torch.logsumexp(z, dim=-1)
        if "self_certainty" in out:
            out["self_certainty"][start:stop] = lse - z.mean(dim=-1) - log_v
        if "entropy" in out:
            out["entropy"][start:stop] = lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    return {k: v.reshape(lead) for k, v in out.items()}


def self_certainty_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                               temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """``SC_t = logsumexp(z_t) - mean_j z_t,j - log V`` per token, chunked over tokens."""
    return token_stats_from_logits(logits, chunk_size, temperature, which=("self_certainty",))["self_certainty"]


def entropy_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                        temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """Full-vocabulary entropy ``H(p_t)`` per token, chunked over tokens."""
    return token_stats_from_logits(logits, chunk_size, temperature, which=("entropy",))["entropy"]
