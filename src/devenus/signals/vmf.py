"""von Mises-Fisher math on the unit sphere S^{d-1}, in float64 (GeoMin's layer fits; any direction
statistic can use it).

- :func:`log_bessel_iv`: log I_v(k), finite at order ~d/2 where ``scipy.special.ive`` underflows (the
  uniform Debye expansion there);
- :func:`vmf_log_normalizer`: log C_d(kappa) = (d/2 - 1) log kappa - (d/2) log 2pi - log I_{d/2-1}(kappa),
  the uniform density's value at kappa = 0;
- :func:`estimate_kappa`: Banerjee et al.'s R(d - R^2)/(1 - R^2), refined by Newton steps on A_d(kappa) = R;
- :func:`fit_vmf`, :func:`vmf_llr`: a fit to unit rows and the log-likelihood ratio of two fits;
- :func:`heldout_aurocs`, :func:`top_layers`: per layer, the AUROC of that LLR on a held-out half (one
  AUROC in the tree: :func:`devenus.signals.group.auroc`), and the best layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, ive

from devenus.signals.group import auroc

LOG_2PI = math.log(2.0 * math.pi)

def _log_iv_debye(v: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log I_v(k) by the uniform (Debye) expansion for large order, three correction terms (relative error
    ~1e-10 at v >= 50, where ``ive`` can underflow)."""
    z = k / v
    s = np.sqrt(1.0 + z * z)
    t = 1.0 / s
    eta = s + np.log(z / (1.0 + s))
    u1 = t * (3.0 - 5.0 * t**2) / 24.0
    u2 = t**2 * (81.0 - 462.0 * t**2 + 385.0 * t**4) / 1152.0
    u3 = t**3 * (30375.0 - 369603.0 * t**2 + 765765.0 * t**4 - 425425.0 * t**6) / 414720.0
    return v * eta - 0.5 * np.log(2.0 * np.pi * v) - 0.5 * np.log(s) + np.log1p(u1 / v + u2 / v**2 + u3 / v**3)


def log_bessel_iv(v: float, k) -> np.ndarray:
    """log I_v(k) for v >= 0, k >= 0, finite at any order: log(ive(v, k)) + k where ``ive`` is a normal
    float; the Debye expansion where it underflows (large v, small k); the leading series term for tiny k
    at small order. I_v(0) = 0 for v > 0, so log I_v(0) = -inf (callers treat kappa = 0 themselves)."""
    k = np.asarray(k, dtype=np.float64)
    v = float(v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        scaled = ive(v, k)
        out = np.log(scaled) + k
        bad = ~(np.isfinite(out) & (scaled > 1e-300))
        if bad.any():
            kb = k[bad] if k.ndim else k
            if v >= 1.0:
                alt = _log_iv_debye(np.float64(v), np.maximum(kb, 1e-300))
            else:  # small order underflows only for astronomically small k: the series' first term
                alt = v * np.log(np.maximum(kb, 1e-300) / 2.0) - gammaln(v + 1.0)
            alt = np.where(kb == 0.0, 0.0 if v == 0.0 else -np.inf, alt)
            if k.ndim:
                out[bad] = alt
            else:
                out = alt
    return out


def vmf_log_normalizer(d: int, kappa) -> np.ndarray:
    """log C_d(kappa), the vMF density on S^{d-1} being C_d(kappa) exp(kappa mu.x); at kappa = 0 the
    uniform density's log(1/|S^{d-1}|) = log Gamma(d/2) - log 2 - (d/2) log pi."""
    kappa = np.asarray(kappa, dtype=np.float64)
    v = d / 2.0 - 1.0
    uniform = gammaln(d / 2.0) - math.log(2.0) - (d / 2.0) * math.log(math.pi)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = v * np.log(kappa) - (d / 2.0) * LOG_2PI - log_bessel_iv(v, kappa)
    # below ~1e-8 the two large terms cancel to rounding noise; the uniform limit is exact to O(kappa^2/d)
    return np.where(kappa < 1e-8, uniform, val)


def mean_resultant_ratio(d: int, kappa: float) -> float:
    """A_d(kappa) = I_{d/2}(kappa) / I_{d/2-1}(kappa) (the expected |mean| of vMF samples)."""
    if kappa <= 0:
        return 0.0
    return float(np.exp(log_bessel_iv(d / 2.0, kappa) - log_bessel_iv(d / 2.0 - 1.0, kappa)))


def estimate_kappa(rbar: float, d: int, newton_steps: int = 2, max_kappa: float = 1e6) -> float:
    """kappa from the mean resultant length R: Banerjee et al.'s R(d - R^2)/(1 - R^2), then Newton steps
    on A_d(kappa) = R (A' = 1 - A^2 - (d-1) A / kappa); clipped to [0, max_kappa]."""
    r = min(max(float(rbar), 0.0), 1.0 - 1e-12)
    if r <= 0.0:
        return 0.0
    kappa = min(r * (d - r * r) / (1.0 - r * r), max_kappa)
    for _ in range(newton_steps):
        a = mean_resultant_ratio(d, kappa)
        slope = 1.0 - a * a - (d - 1.0) * a / kappa
        if not (np.isfinite(a) and slope > 0):
            break  # A is flat to rounding at huge kappa: Banerjee's value is already the answer there
        nxt = kappa - (a - r) / slope
        if not np.isfinite(nxt) or nxt <= 0:
            break
        kappa = min(nxt, max_kappa)
    return float(kappa)


@dataclass(frozen=True)
class VMF:
    mu: np.ndarray  # (d,) unit
    kappa: float
    log_c: float

    def log_pdf(self, x: np.ndarray) -> np.ndarray:
        return self.log_c + self.kappa * (np.asarray(x, dtype=np.float64) @ self.mu)


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    x = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


def fit_vmf(x: np.ndarray, newton_steps: int = 2, max_kappa: float = 1e6) -> VMF:
    """Maximum-likelihood-style vMF fit to unit rows ``x`` (n, d): mu = the normalised mean, kappa from
    the mean resultant length (:func:`estimate_kappa`)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[1]
    s = x.sum(axis=0)
    norm = float(np.linalg.norm(s))
    mu = s / norm if norm > 0 else np.eye(d)[0]
    kappa = estimate_kappa(norm / len(x), d, newton_steps, max_kappa)
    return VMF(mu, kappa, float(vmf_log_normalizer(d, kappa)))


def vmf_llr(feats: np.ndarray, correct: np.ndarray, fit_rows: np.ndarray, newton_steps: int = 2,
            max_kappa: float = 1e6) -> tuple[np.ndarray, VMF, VMF]:
    """(LLR of every row of ``feats`` (n, d unit), the correct fit, the incorrect fit); fits on ``fit_rows``."""
    correct = np.asarray(correct, bool)
    fc = fit_vmf(feats[fit_rows & correct], newton_steps, max_kappa)
    fi = fit_vmf(feats[fit_rows & ~correct], newton_steps, max_kappa)
    return fc.log_pdf(feats) - fi.log_pdf(feats), fc, fi


def split_halves(correct: np.ndarray) -> np.ndarray:
    """Fit-half mask: per class, alternate rollouts in batch order (the first of each class fits), so both
    halves hold both classes whenever each class has >= 2 rollouts."""
    correct = np.asarray(correct, bool)
    fit = np.zeros(len(correct), bool)
    for cls in (True, False):
        idx = np.flatnonzero(correct == cls)
        fit[idx[0::2]] = True
    return fit


def heldout_aurocs(features: np.ndarray, correct: np.ndarray, newton_steps: int = 2,
                   max_kappa: float = 1e6) -> np.ndarray:
    """Per layer, the AUROC of the LLR for "correct" on the held-out half of labeled rollouts, the vMFs
    fitted on the other half. ``features``: (n, L, d) unit rows, or anything that
    returns them for ``features[:, layer]`` (GeoMin's centred layers). NaN where a half lacks a class."""
    correct = np.asarray(correct, bool)
    fit = split_halves(correct)
    held = ~fit
    if min((fit & correct).sum(), (fit & ~correct).sum(), (held & correct).sum(), (held & ~correct).sum()) == 0:
        return np.full(features.shape[1], np.nan)
    out = np.empty(features.shape[1])
    for layer in range(features.shape[1]):
        llr, _, _ = vmf_llr(features[:, layer], correct, fit, newton_steps, max_kappa)
        out[layer] = auroc(llr[held], correct[held])
    return out


def top_layers(aurocs: np.ndarray, k: int) -> list[int]:
    """The ``k`` layers with the highest AUROC (NaN never chosen; ties: the lower layer)."""
    a = np.asarray(aurocs, dtype=np.float64)
    ok = [i for i in range(len(a)) if np.isfinite(a[i])]
    return sorted(ok, key=lambda i: (-a[i], i))[:k]
