"""The CoE reference formula (methods.md), written out independently; shared by the forward test."""

import cmath
import math

import numpy as np


def coe_reference(h: np.ndarray) -> tuple[float, float]:
    """methods.md: M_l = ||h_{l+1}-h_l|| / ||h_L-h_0||; A_l = arccos(cos(h_{l+1},h_l)) / arccos(cos(h_L,h_0));
    CoE-R = mean M - mean A; CoE-C = |mean_l M_l e^{i A_l}|."""
    def ang(x, y):
        return math.acos(max(-1.0, min(1.0, float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))))))

    big_l = len(h) - 1
    ms = [np.linalg.norm(h[l + 1] - h[l]) / np.linalg.norm(h[big_l] - h[0]) for l in range(big_l)]
    as_ = [ang(h[l + 1], h[l]) / ang(h[big_l], h[0]) for l in range(big_l)]
    r = sum(ms) / big_l - sum(as_) / big_l
    c = abs(sum(m * cmath.exp(1j * a) for m, a in zip(ms, as_)) / big_l)
    return r, c
