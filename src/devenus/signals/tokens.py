"""Token-level statistics of a model's next-token distributions, from its logits.

For logits ``z_t`` of width V (the logits dimension, which may exceed the tokenizer's size):

- self-certainty ``SC_t = KL(U || p_t) = logsumexp(z_t) - mean_j z_t,j - log V``: 0 for a uniform
  distribution, and unbounded above (it grows with the gap between the largest logit and the mean:
  a testbed token reached 6.50 against log V = 5.95; one logit raised by 80 gives about 73);
- entropy ``H(p_t) = logsumexp(z_t) - sum_j p_t,j z_t,j`` (full vocabulary), in [0, log V].

Both are computed in chunks of tokens, so the working memory is a few ``[chunk, V]`` float32
buffers, never ``[tokens, V]`` for a whole long response. The chunk is chosen from a memory budget
(:func:`chunk_rows`): at most ``budget_bytes // (V * 4 * BUFFERS)`` tokens, ``BUFFERS`` the number of
``[chunk, V]`` float32 temporaries alive at once (the float32 copy of the chunk, divided by the
temperature in place, and one more for logsumexp's shifted exponentials or the softmax). A fixed
token count is not a bound: 1024 tokens at V = 151,936 is 0.6 GB per buffer (measured 1.2 GB extra in
fp32 and 1.8 GB in bf16 for the former fixed chunk). ``chunk_size`` caps the chunk further. Each
token's statistics are row-wise reductions, so the chunking does not change the results.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

DEFAULT_CHUNK_SIZE = 1024  # most tokens per chunk; the memory budget below usually binds first at real V
#: bytes of [chunk, V] float32 temporaries the kernel may hold at once (128 MiB: 73 tokens at V = 151,936)
DEFAULT_BUDGET_BYTES = 128 * 2**20
#: [chunk, V] float32 temporaries alive at once, counted conservatively (measured: 2 at most)
BUFFERS = 3
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


def chunk_rows(vocab: int, chunk_size: int = DEFAULT_CHUNK_SIZE, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> int:
    """Tokens per chunk: ``chunk_size`` or fewer, so that ``BUFFERS`` float32 ``[chunk, V]`` temporaries
    fit ``budget_bytes`` (at least 1 token, whatever the budget)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if budget_bytes < 1:
        raise ValueError(f"budget_bytes must be >= 1, got {budget_bytes}")
    return max(1, min(int(chunk_size), int(budget_bytes) // (int(vocab) * 4 * BUFFERS)))


def token_stats_from_logits(
    logits: torch.Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    temperature: float | torch.Tensor | None = None,
    which: Sequence[str] = TOKEN_STATS,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
) -> dict[str, torch.Tensor]:
    """Per-token statistics of ``logits`` ``[..., V]``, chunked over the tokens (leading dims).

    Args:
        logits: raw logits; any float dtype (each chunk is computed in float32).
        chunk_size: most tokens per chunk; the budget may lower it (:func:`chunk_rows`).
        temperature: divides the logits first (a scalar, or a tensor broadcastable to ``logits.shape[:-1]``).
        which: any of ``"self_certainty"``, ``"entropy"``.
        budget_bytes: bound on the ``[chunk, V]`` float32 temporaries held at once.

    Returns:
        ``{name: float32 tensor of shape logits.shape[:-1]}``.
    """
    unknown = set(which) - set(TOKEN_STATS)
    if unknown:
        raise ValueError(f"unknown token statistics {sorted(unknown)}; known: {list(TOKEN_STATS)}")
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    rows = chunk_rows(vocab, chunk_size, budget_bytes)
    flat = logits.reshape(-1, vocab)  # a view for contiguous logits (what a model returns)
    temp = _per_token(temperature, lead, logits.device)
    n = flat.shape[0]
    out = {k: torch.empty(n, dtype=torch.float32, device=logits.device) for k in which}
    log_v = math.log(vocab)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        z = flat[start:stop]
        if temp is not None:  # one float32 buffer, divided in place (never a second copy)
            z = z.to(torch.float32, copy=True).div_(temp[start:stop, None].clamp(min=1e-8))
        else:
            z = z.float()  # a view when the logits are float32 already
        lse = torch.logsumexp(z, dim=-1)
        if "self_certainty" in out:
            out["self_certainty"][start:stop] = lse - z.mean(dim=-1) - log_v
        if "entropy" in out:  # sum_j p_j z_j with the product written into the softmax's buffer
            out["entropy"][start:stop] = lse - torch.softmax(z, dim=-1).mul_(z).sum(dim=-1)
        del z
    return {k: v.reshape(lead) for k, v in out.items()}


def self_certainty_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                               temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """``SC_t = logsumexp(z_t) - mean_j z_t,j - log V`` per token, chunked over tokens."""
    return token_stats_from_logits(logits, chunk_size, temperature, which=("self_certainty",))["self_certainty"]


def entropy_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                        temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """Full-vocabulary entropy ``H(p_t)`` per token, chunked over tokens."""
    return token_stats_from_logits(logits, chunk_size, temperature, which=("entropy",))["entropy"]
