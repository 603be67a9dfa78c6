"""Statistics of one sample's series over visits (pass-rate trajectories), in float64.

A NaN point has no defined trend or shape: :func:`ls_slope` and :func:`znorm` return NaN for a series
holding one (callers treat NaN as "not decided", never as a value that passes a threshold), and
:func:`cosine` is NaN when either vector holds one.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

#: tolerance of threshold comparisons: pass rates are ratios of small integers, and a float64 slope of an
#: exactly-0.05 series can land 1e-17 below 0.05 (the reference compares a float32 slope and misses it)
EPS = 1e-9


def ls_slope(values: Iterable[float]) -> float:
    """Least-squares slope of ``values`` against 0, 1, 2, ... (0 for fewer than two points; NaN when a
    point is NaN), in float64."""
    y = np.asarray(list(values), dtype=np.float64)
    n = len(y)
    if np.isnan(y).any():
        return float("nan")
    if n < 2:
        return 0.0
    x = np.arange(n, dtype=np.float64)
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / (xc * xc).sum())


def znorm(x) -> np.ndarray:
    """(x - mean) / std; the zero vector for a constant series (std 0): it resembles nothing. All NaN when
    a point is NaN."""
    x = np.asarray(x, dtype=np.float64)
    if np.isnan(x).any():
        return np.full_like(x, np.nan)
    sd = x.std() if x.size else 0.0
    return np.zeros_like(x) if sd <= EPS else (x - x.mean()) / sd


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """a.b / (|a| |b|); 0 when either is (numerically) the zero vector; NaN when either holds a NaN."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return 0.0 if na <= EPS or nb <= EPS else float(a @ b / (na * nb))
