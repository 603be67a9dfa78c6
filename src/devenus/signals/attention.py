"""Attention statistics without attention maps: PivotTrace (Zhu et al. 2026a; RECONSTRUCTED from
methods.md).

:func:`far_attention_mass`: for each query position i, the softmax attention mass (heads averaged)
that falls on keys more than ``window`` positions back (``j < i - window``), the attention-sink
position 0 excluded; computed from captured Q and K in query chunks (GQA: each key head serves
``Hq / Hkv`` query heads), so memory is O(chunk x T) per head, never the [H, T, T] map.

:func:`pivot_count`: split a response into steps; a step's score is the mean of the per-token mass over
its first ``first`` tokens; a pivot is a step whose score exceeds the mean of the previous ``history``
steps by ``z`` standard deviations (population std; at least 2 previous steps needed).

:func:`pivot_density`: the paper's reading (its abstract measures uncertainty by pivot *density*): pivots
per 1,000 response tokens, so a long response is not more "uncertain" only because it has more steps.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch


def far_attention_mass(q: torch.Tensor, k: torch.Tensor, key_mask: torch.Tensor, window: int = 256,
                       chunk: int = 256, scaling: float | None = None, exclude_sink: bool = True) -> torch.Tensor:
    """``[B, T]`` far-back attention mass per query position (0 where there is nothing that far back).

    Args:
        q: ``[B, Hq, T, d]`` queries (after rotary embedding), k: ``[B, Hkv, T, d]`` keys (same).
        key_mask: ``[B, T]`` 1 for real tokens (right padding), 0 for padding.
        window: keys with ``j < i - window`` count as far back.
        scaling: score scale (default ``d ** -0.5``).
    """
    b, hq, t, d = q.shape
    hkv = k.shape[1]
    if hq % hkv:
        raise ValueError(f"query heads {hq} not a multiple of key heads {hkv}")
    group = hq // hkv
    scale = d ** -0.5 if scaling is None else scaling
    kk = k.float().repeat_interleave(group, dim=1)  # [B, Hq, T, d]: the GQA key of each query head
    keys = torch.arange(t, device=q.device)
    valid_key = key_mask.bool()[:, None, None, :]
    out = torch.zeros(b, t, dtype=torch.float32, device=q.device)
    for s in range(0, t, chunk):
        e = min(s + chunk, t)
        scores = torch.matmul(q[:, :, s:e].float(), kk.transpose(-1, -2)) * scale  # [B, Hq, c, T]
        qi = torch.arange(s, e, device=q.device)[:, None]
        allowed = (keys[None, :] <= qi)[None, None] & valid_key
        scores = scores.masked_fill(~allowed, -math.inf)
        p = torch.softmax(scores, dim=-1)
        far = keys[None, :] < (qi - window)
        if exclude_sink:
            far = far & (keys[None, :] > 0)
        out[:, s:e] = (p * far[None, None]).sum(-1).mean(1)
        del scores, p
    return out


def pivot_count(mass: Sequence[float], step_starts: Sequence[int], first: int = 8, history: int = 8,
                z: float = 2.0) -> int:
    """Pivots in one response: ``mass`` per response token, ``step_starts`` the first token of each step."""
    m = np.asarray(mass, dtype=np.float64)
    starts = list(step_starts)
    scores = [float(m[a: min(a + first, m.size if i + 1 == len(starts) else starts[i + 1])].mean())
              for i, a in enumerate(starts) if a < m.size]
    pivots = 0
    for i in range(2, len(scores)):
        prev = np.asarray(scores[max(0, i - history): i])
        if scores[i] > prev.mean() + z * prev.std():
            pivots += 1
    return pivots


#: pivot density is per this many response tokens
DENSITY_TOKENS = 1000


def pivot_density(mass: Sequence[float], step_starts: Sequence[int], first: int = 8, history: int = 8,
                  z: float = 2.0) -> float:
    """Pivots per 1,000 response tokens (``len(mass)`` is the response length): :func:`pivot_count`
    x 1000 / tokens. NaN for an empty response (no tokens: no density, left to the scorer's missing-value
    rule rather than read as "no pivots")."""
    n = len(mass)
    if n == 0:
        return float("nan")
    return pivot_count(mass, step_starts, first, history, z) * DENSITY_TOKENS / n
