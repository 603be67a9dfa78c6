"""Rank statistics that scale: AUROC by the Mann-Whitney rank sum (O(n log n), ties count half), for
large pools where :func:`devenus.signals.auroc`'s pairwise form (O(n_pos x n_neg)) does not fit."""

from __future__ import annotations

import numpy as np


def rank_auroc(scores, positive) -> float:
    """AUROC of ``scores`` for predicting ``positive``; NaN scores dropped; NaN with one class only."""
    s, p = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    keep = ~np.isnan(s)
    s, p = s[keep], p[keep]
    n_pos, n_neg = int(p.sum()), int((~p).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="stable")
    ss = s[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # average rank of each run of equal scores (1-based)
    starts = np.r_[0, np.flatnonzero(np.diff(ss)) + 1]
    ends = np.r_[starts[1:], len(ss)]
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    u = ranks[p].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))
