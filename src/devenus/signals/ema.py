"""Exponential moving averages of model weights (an EMA teacher) and their schedule."""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import torch


def cosine_alpha(update: int, total: int, start: float, end: float) -> float:
    """EMA weight of the ``update``-th update (1-based): ``start`` at 1, cosine down to ``end`` at ``total``."""
    if update <= 1:
        return float(start)
    if update >= total:
        return float(end)
    frac = (update - 1) / (total - 1)
    return float(end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * frac)))


@torch.no_grad()
def ema_update_(teacher: Mapping[str, torch.Tensor], student: Mapping[str, torch.Tensor], alpha: float) -> float:
    """``teacher <- (1 - alpha) teacher + alpha student`` in place, per tensor; returns the squared L2
    distance between the two *after* the update (summed over tensors; callers add the shards' sums)."""
    missing = set(teacher) ^ set(student)
    if missing:
        raise KeyError(f"teacher and student tensors differ: {sorted(missing)[:5]}")
    sq = 0.0
    for name, t in teacher.items():
        s = student[name].detach()
        if s.shape != t.shape:
            raise ValueError(f"{name}: teacher shape {tuple(t.shape)} != student shape {tuple(s.shape)}")
        if t.is_floating_point():
            t.lerp_(s.to(t.dtype), float(alpha))
            sq += float((t.double() - s.double()).pow(2).sum())
    return sq


def tensor_checksum(tensors: Iterable[torch.Tensor]) -> float:
    """A cheap fingerprint (sum of |x|, float64) for checking that restored weights are the saved ones."""
    return float(sum(t.detach().double().abs().sum() for t in tensors if t.is_floating_point()))
