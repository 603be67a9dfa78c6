"""Statistics over rows that share a group (a prompt's rollouts) or over a whole batch."""

from __future__ import annotations

import math

import numpy as np

NORMALIZATIONS = ("zscore", "center", "rank")


def group_normalize(values, group_ids, mode: str = "zscore", eps: float = 1e-6) -> np.ndarray:
    """Normalise ``values`` within each group (rows sharing a ``group_ids`` value); NaN rows stay NaN.

    Modes: ``zscore`` ((v - mean) / (std + eps); a constant group becomes 0), ``center`` (v - mean),
    ``rank`` (ranks scaled to [0, 1], ties averaged; a single row gets 0.5).
    """
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(group_ids)
    if v.shape != g.shape or v.ndim != 1:
        raise ValueError(f"values {v.shape} and group_ids {g.shape} must be equal 1-D shapes")
    if mode not in NORMALIZATIONS:
        raise ValueError(f"unknown normalisation mode {mode!r}; known: {list(NORMALIZATIONS)}")
    out = np.full_like(v, np.nan)
    for key in dict.fromkeys(g.tolist()):
        rows = np.flatnonzero((g == key) & ~np.isnan(v))
        if not len(rows):
            continue
        x = v[rows]
        if mode == "center":
            out[rows] = x - x.mean()
        elif mode == "zscore":
            out[rows] = (x - x.mean()) / (x.std() + eps)
        else:
            from scipy.stats import rankdata  # (imported only for rank mode)

            ranks = rankdata(x, method="average") - 1.0  # 0-based, ties averaged
            out[rows] = ranks / (len(x) - 1) if len(x) > 1 else 0.5
    return out


def fill_missing(values, group_ids) -> np.ndarray:
    """NaN rows take their group's mean over valid rows (0 when the group has none): a neutral value."""
    values = np.asarray(values, dtype=np.float64)
    group_ids = np.asarray(group_ids)
    out = values.copy()
    missing = np.isnan(out)
    for g in np.unique(group_ids[missing]):
        rows = group_ids == g
        valid = rows & ~missing
        out[rows & missing] = values[valid].mean() if valid.any() else 0.0
    return out


def auroc(scores, positive) -> float:
    """Area under the ROC curve of ``scores`` for predicting ``positive`` (ties count half); NaN scores are
    dropped; NaN with one class only. The Mann-Whitney rank sum: O(n log n), so a 1M-question pool fits.
    Kept over ``sklearn.metrics.roc_auc_score`` (same value, tested): that raises on one class, and its ~3 s
    import would land in every verl worker that logs a labeled AUROC."""
    s, p = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    keep = ~np.isnan(s)
    s, p = s[keep], p[keep]
    n_pos, n_neg = int(p.sum()), int((~p).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="stable")
    ss = s[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ss)) + 1]  # runs of equal scores share their average rank
    ends = np.r_[starts[1:], len(ss)]
    ranks = np.empty(len(s), dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return float((ranks[p].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def auroc_interval(scores, positive, boot: int = 1000, seed: int = 0) -> tuple[float, float, float]:
    """(AUROC, 2.5th, 97.5th percentile) of :func:`auroc` over ``boot`` resamples of the rows with
    replacement (a percentile bootstrap over questions, seeded); resamples with one class only are skipped.
    All NaN when the rows hold one class only."""
    s, p = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    auc = auroc(s, p)
    if not np.isfinite(auc):
        return float("nan"), float("nan"), float("nan")
    lo, hi = bootstrap_auroc_interval(s, p, np.random.default_rng(seed), boot)
    return auc, lo, hi


def bootstrap_auroc_interval(scores: np.ndarray, positive: np.ndarray, rng: np.random.Generator,
                             boot: int) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of :func:`auroc` over ``boot`` resamples of the rows drawn from
    ``rng`` (resamples with one class only are skipped; NaN when none is left)."""
    n = len(scores)
    boots = [b for b in (auroc(scores[i], positive[i]) for i in (rng.integers(0, n, n) for _ in range(boot)))
             if np.isfinite(b)]
    if not boots:
        return float("nan"), float("nan")
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(lo), float(hi)


def pearson(a, b) -> float:
    """Pearson correlation over rows where both are finite; NaN when either is constant or < 2 rows."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return float("nan")
    x, y = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    den = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    return float((x * y).sum() / den) if den > 1e-12 else float("nan")
