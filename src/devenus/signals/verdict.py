"""Verdict probability: how strongly a model says "yes" rather than "no" about a candidate answer."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def verdict_probability(lp_yes, lp_no) -> np.ndarray:
    """``P(yes) = sigmoid(log p(yes) - log p(no))``: the two verdicts renormalised against each other."""
    d = np.asarray(lp_no, dtype=np.float64) - np.asarray(lp_yes, dtype=np.float64)
    return 1.0 / (1.0 + np.exp(np.clip(d, -700, 700)))


def distinct_candidates(questions: Sequence, preds: Sequence[str | None]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The distinct (question, answer) pairs to judge, and per row its pair's index (-1: no answer)."""
    pairs: dict[tuple[str, str], int] = {}
    idx = np.full(len(preds), -1, dtype=np.int64)
    for i, (q, a) in enumerate(zip(questions, preds)):
        if a is not None:
            idx[i] = pairs.setdefault((str(q), str(a)), len(pairs))
    return list(pairs), idx
