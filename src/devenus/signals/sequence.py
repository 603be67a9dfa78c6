"""Sequence-level scores: per-token values reduced over each row's valid response tokens.

``values`` and ``mask`` are ``[rows, T]`` (torch or numpy); the result is a float64 numpy vector. A row
without a valid token scores NaN ("no score"), which every consumer treats as "keep what verl had".
"""

from __future__ import annotations

import numpy as np
import torch


def _as_float64(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def masked_sum(values, mask) -> np.ndarray:
    """Per row, the sum over valid tokens (NaN for a row without one)."""
    v, m = _as_float64(values), _as_float64(mask) > 0
    if v.shape != m.shape:
        raise ValueError(f"values {v.shape} and mask {m.shape} differ in shape")
    out = np.where(m, v, 0.0).sum(axis=1)
    out[~m.any(axis=1)] = np.nan
    return out


def masked_mean(values, mask) -> np.ndarray:
    """Per row, the mean over valid tokens (NaN for a row without one)."""
    m = _as_float64(mask) > 0
    count = m.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return masked_sum(values, m) / np.where(count > 0, count, np.nan)


def mean_self_certainty(self_certainty, mask) -> np.ndarray:
    """Intuitor's response score: mean SC_t over valid response tokens."""
    return masked_mean(self_certainty, mask)


def negative_mean_entropy(entropy, mask) -> np.ndarray:
    """EMRL's token-level score: ``-mean_t H(p_t)``."""
    return -masked_mean(entropy, mask)


def mean_log_prob(log_probs, mask) -> np.ndarray:
    """EMRL's trajectory-level score: the mean log-probability of the sampled tokens."""
    return masked_mean(log_probs, mask)


def sum_log_prob(log_probs, mask) -> np.ndarray:
    """The sequence log-probability: the sum of the sampled tokens' log-probabilities."""
    return masked_sum(log_probs, mask)
