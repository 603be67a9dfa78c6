"""A seeded two-component 1-D Gaussian mixture whose higher-mean component is "reliable", and the
numerically stable log-sigmoid (GeoMin's affinities; any 1-D score that splits into two modes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log(1 / (1 + exp(-x))) without overflow at large |x|."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


@dataclass(frozen=True)
class Mixture:
    posterior: np.ndarray  # per value: P(reliable component)
    weights: tuple[float, float]  # (reliable, other)
    means: tuple[float, float]
    stds: tuple[float, float]


def reliable_posteriors(values: np.ndarray, seed: int = 0) -> Mixture | None:
    """A seeded 2-component 1-D Gaussian mixture over ``values``; the higher-mean component is reliable.
    None when fewer than two distinct values (no mixture to fit); a NaN or infinite value is an error (the
    caller leaves unscored items out, it never fits them)."""
    from sklearn.mixture import GaussianMixture

    v = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    if not np.isfinite(v).all():
        bad = np.flatnonzero(~np.isfinite(v[:, 0]))
        raise ValueError(f"mixture values must be finite; value {int(bad[0])} is {float(v[bad[0], 0])} "
                         f"({len(bad)} of {len(v)} non-finite)")
    if len(np.unique(v)) < 2:
        return None
    gm = GaussianMixture(n_components=2, random_state=seed, reg_covar=1e-6 * max(1.0, float(v.var()))).fit(v)
    means = gm.means_[:, 0]
    hi = int(np.argmax(means))
    lo = 1 - hi
    sd = np.sqrt(gm.covariances_.reshape(2))
    return Mixture(gm.predict_proba(v)[:, hi], (float(gm.weights_[hi]), float(gm.weights_[lo])),
                   (float(means[hi]), float(means[lo])), (float(sd[hi]), float(sd[lo])))
