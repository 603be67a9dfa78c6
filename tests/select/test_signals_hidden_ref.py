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


def kinetics_reference(states: np.ndarray, mask: np.ndarray, g: float = 0.8) -> float:
    """methods.md CoT-Kinetics, per token and layer in plain loops: unit-normalised states, v_l = x_{l+1} - x_l,
    K = mean ||v_l||^2, C = mean (1 - cos(v_l, v_{l+1})), E = g K + (1 - g) C, mean over masked tokens."""
    energies = []
    for t in np.flatnonzero(mask):
        x = [s[t] / np.linalg.norm(s[t]) for s in states]
        v = [x[l + 1] - x[l] for l in range(len(x) - 1)]
        k = sum(float(vi @ vi) for vi in v) / len(v)
        c = sum(1 - float(v[l] @ v[l + 1]) / (np.linalg.norm(v[l]) * np.linalg.norm(v[l + 1])) for l in range(len(v) - 1)) / (len(v) - 1)
        energies.append(g * k + (1 - g) * c)
    return float(np.mean(energies))
