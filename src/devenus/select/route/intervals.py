"""Difficulty intervals on the pass rate p (labeled pools): keep ``low <= p <= high`` (each bound
inclusive or not: ``dapo`` is 0 < p < 1, ``balanced`` [0.25, 0.75], ``polaris`` drops p = 1), then,
over a training budget, the ``budget`` most uncertain of the kept questions. Kept rows keep their
labels (decision ``keep``); the rest are discarded."""

from __future__ import annotations

import numpy as np


def interval_mask(p: np.ndarray, low: float, high: float, low_inclusive: bool = True,
                  high_inclusive: bool = True) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    lo = p >= low if low_inclusive else p > low
    hi = p <= high if high_inclusive else p < high
    return lo & hi & np.isfinite(p)


def interval_route(p: np.ndarray, u: np.ndarray, ties: np.ndarray, bounds: tuple[float, float, bool, bool],
                   budget: int | None = None) -> np.ndarray:
    """Decisions (``KEEP`` / ``DISCARD`` codes) per question."""
    from devenus.select.route.order import DISCARD, KEEP, uncertainty_order

    inside = interval_mask(p, *bounds)
    out = np.full(len(p), DISCARD, dtype=np.int8)
    if budget is None or budget >= int(inside.sum()):
        out[inside] = KEEP
        return out
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    order = uncertainty_order(np.where(inside, u, -np.inf), ties)
    out[order[:budget]] = KEEP
    return out
