"""GeoMin (Zhu et al. 2026b; RECONSTRUCTED from the paper's description, no public code): admit and
reweight unlabeled groups by the geometry of their rollouts' hidden states.

Features: per rollout and layer l, the mean of the layer's hidden states over the response tokens
(``hidden_pooled``, captured in the actor's log-prob forward by the engine extension, Hugging Face's
``hidden_states`` order: embeddings first, the last layer after the final norm), centred by a running
mean over every rollout seen so far and L2-normalised.

Per layer, von Mises-Fisher fits to this step's correct and incorrect *labeled* rollouts (correct = the
verifier scored it > 0.5 against the gold target): mu = the normalised mean, kappa by Banerjee et al.'s
approximation R(d - R^2)/(1 - R^2), refined by Newton steps on A_d(kappa) = R. The log-normaliser
log C_d(kappa) = (d/2 - 1) log kappa - (d/2) log 2pi - log I_{d/2-1}(kappa) uses a log-Bessel that is
stable at order ~d/2 (:func:`log_bessel_iv`). LLR_l(x) = log f_correct(x) - log f_incorrect(x).

Layers: every ``refresh_every`` steps (and whenever none is chosen yet), each layer is fitted on one
half of the labeled rollouts (per class, alternating in batch order) and scored by the AUROC of its LLR
for "correct" on the other half; the ``top_layers`` best are kept. LLR = the mean of their LLRs, with
fits on all of this step's labeled rollouts.

Unlabeled groups train against their unique majority answer (S_y; no majority: dropped). With M the
group's rollouts in the majority (scored > 0.5 against it) and m the others:
a = mean_{y in M} log sigmoid(LLR(y)) + mean_{y in m} log sigmoid(-LLR(y)) (first term only when m is
empty). A seeded 2-component 1-D Gaussian mixture is fitted to this step's affinities plus a buffer of
earlier steps'; w = the posterior of the higher-mean component. Admitted (S_b) iff w > ``keep_above``;
advantages scaled by w (S_a) when ``band_low`` < w < ``band_high``, else weight 1. Labeled groups are
always admitted with weight 1. Until the method is ready (warm-up steps, too few labeled rollouts of
either class, no layer with a held-out AUROC, too few affinities for the mixture) labeled rows train as
GRPO and unlabeled groups are not admitted.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln, ive

from devenus.online.config import ConfigError, MethodConfig, option
from devenus.online.refine.common import RefineMethod, observe_groups
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.signals import auroc

#: the statistic the engine extension returns: [rows, layers, d] response-pooled hidden states
HIDDEN_POOLED = "hidden_pooled"
LOG_2PI = math.log(2.0 * math.pi)


# ---------------------------------------------------------------------------------------- vMF math
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


class CentredLayers:
    """Pooled states ``h`` (n, L, d), read one layer at a time as centred unit rows in float64: the float64
    copy of a whole batch (n x L x d x 8 bytes, ~850 MB for 1024 rollouts of a 7B model) never exists."""

    def __init__(self, h: np.ndarray, mean: np.ndarray):
        self.h, self.mean = h, mean
        self.shape = h.shape

    def __getitem__(self, key) -> np.ndarray:
        rows, layer = key
        return unit_rows(self.h[rows, layer].astype(np.float64) - self.mean[layer])


def layer_llr(feats: np.ndarray, correct: np.ndarray, fit_rows: np.ndarray, newton_steps: int = 2,
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
    fitted on the other half. ``features``: (n, L, d) unit rows, or :class:`CentredLayers`. NaN where a half lacks a class."""
    correct = np.asarray(correct, bool)
    fit = split_halves(correct)
    held = ~fit
    if min((fit & correct).sum(), (fit & ~correct).sum(), (held & correct).sum(), (held & ~correct).sum()) == 0:
        return np.full(features.shape[1], np.nan)
    out = np.empty(features.shape[1])
    for layer in range(features.shape[1]):
        llr, _, _ = layer_llr(features[:, layer], correct, fit, newton_steps, max_kappa)
        out[layer] = auroc(llr[held], correct[held])
    return out


def top_layers(aurocs: np.ndarray, k: int) -> list[int]:
    """The ``k`` layers with the highest AUROC (NaN never chosen; ties: the lower layer)."""
    a = np.asarray(aurocs, dtype=np.float64)
    ok = [i for i in range(len(a)) if np.isfinite(a[i])]
    return sorted(ok, key=lambda i: (-a[i], i))[:k]


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def affinity(llr_majority: np.ndarray, llr_minority: np.ndarray) -> float:
    """mean over M of log sigmoid(LLR) + mean over m of log sigmoid(-LLR) (the second term only when m is
    not empty)."""
    a = float(np.mean(log_sigmoid(llr_majority)))
    if len(llr_minority):
        a += float(np.mean(log_sigmoid(-np.asarray(llr_minority, dtype=np.float64))))
    return a


@dataclass(frozen=True)
class Mixture:
    posterior: np.ndarray  # per value: P(reliable component)
    weights: tuple[float, float]  # (reliable, other)
    means: tuple[float, float]
    stds: tuple[float, float]


def reliable_posteriors(values: np.ndarray, seed: int = 0) -> Mixture | None:
    """A seeded 2-component 1-D Gaussian mixture over ``values``; the higher-mean component is reliable.
    None when fewer than two distinct values (no mixture to fit)."""
    from sklearn.mixture import GaussianMixture

    v = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    if len(np.unique(v)) < 2:
        return None
    gm = GaussianMixture(n_components=2, random_state=seed, reg_covar=1e-6 * max(1.0, float(v.var()))).fit(v)
    means = gm.means_[:, 0]
    hi = int(np.argmax(means))
    lo = 1 - hi
    sd = np.sqrt(gm.covariances_.reshape(2))
    return Mixture(gm.predict_proba(v)[:, hi], (float(gm.weights_[hi]), float(gm.weights_[lo])),
                   (float(means[hi]), float(means[lo])), (float(sd[hi]), float(sd[lo])))


def keep_and_weight(w: np.ndarray, keep_above: float, band_low: float, band_high: float) -> tuple[np.ndarray, np.ndarray]:
    """(admitted: w > keep_above; weight: w inside the open band (band_low, band_high), else 1)."""
    w = np.asarray(w, dtype=np.float64)
    return w > keep_above, np.where((w > band_low) & (w < band_high), w, 1.0)


# ---------------------------------------------------------------------------------------- the method
@dataclass
class GeoMinConfig(MethodConfig):
    warmup_steps: int = option(0, "training steps (global_steps <= this) during which only labeled rows train", ge=0)
    min_per_class: int = option(8, "labeled rollouts of each class (correct, incorrect) a step needs for the vMF "
                                   "fits; fewer: only labeled rows train", ge=2)
    top_layers: int = option(3, "layers kept by held-out AUROC; the LLR is the mean of theirs", ge=1)
    refresh_every: int = option(10, "steps between layer choices (held-out AUROC on that step's labeled rollouts)", ge=1)
    keep_above: float = option(0.5, "an unlabeled group is admitted when its reliable-component posterior w is "
                                    "above this (S_b)", ge=0.0, le=1.0)
    band_low: float = option(0.3, "advantages of admitted groups are scaled by w when band_low < w < band_high "
                                  "(S_a)", ge=0.0, le=1.0)
    band_high: float = option(0.7, "upper end of the reweighting band", ge=0.0, le=1.0)
    buffer_size: int = option(256, "affinities of earlier steps that join the mixture fit (bounded memory)", ge=0)
    min_mixture_points: int = option(8, "affinities (this step + buffer) the mixture needs; fewer: unlabeled "
                                        "groups are not admitted", ge=2)
    newton_steps: int = option(2, "Newton refinements of Banerjee's kappa", ge=0)
    max_kappa: float = option(1e6, "upper clip of kappa (identical rollouts have R = 1)", gt=0.0)
    seed: int = option(0, "seed of the Gaussian mixture's initialisation", ge=0)

    def check(self) -> None:
        if not self.band_low < self.band_high:
            raise ConfigError(f"devenus.method_config.band_low={self.band_low} must be below "
                              f"devenus.method_config.band_high={self.band_high}")


@WeakTrainerInterface.register
class GeoMin(RefineMethod):
    name = "geomin"
    config_class = GeoMinConfig
    data_needs = frozenset({"labels", "unlabeled"})
    step_needs = frozenset({HIDDEN_POOLED})

    def __init__(self, config: GeoMinConfig | None = None):
        super().__init__(config)
        self.mean: np.ndarray | None = None  # (L, d) running mean of the pooled states, float64
        self.mean_count = 0
        self.layers: list[int] = []  # chosen layers, best first
        self.aurocs: list[float] = []  # held-out AUROC per layer at the last choice
        self.refreshed_at = -1  # global step of the last layer choice
        self.buffer: deque[float] = deque(maxlen=self.config.buffer_size)
        self._visits: dict[str, tuple[str, Any]] = {}  # uid -> (key, Visit) of this step, from S_y
        self._decided: dict[str, tuple[bool, float]] = {}  # uid -> (admitted, weight), read by advantage_weights

    # ------------------------------------------------------------------------------ S_y: the majority
    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        new = np.full(len(batch), None, dtype=object)
        self._visits = {}
        for rows, v in observe_groups(batch):
            self._visits[str(batch.uid[rows[0]])] = (str(batch.key[rows[0]]), v)
            if not v.labeled and v.majority is not None:
                new[rows] = v.majority
        return new

    # ------------------------------------------------------------------------------ S_b (decides S_a too)
    def _features(self, batch: RolloutBatch) -> np.ndarray:
        h = batch.token_stats.get(HIDDEN_POOLED)
        if h is None:
            raise KeyError(f"geomin needs {HIDDEN_POOLED!r} from the actor's log-prob pass (have "
                           f"{sorted(batch.token_stats)}): the engine extension must be loaded")
        h = h.numpy() if hasattr(h, "numpy") else np.asarray(h)
        if h.ndim != 3 or h.shape[0] != len(batch):
            raise ValueError(f"{HIDDEN_POOLED} must be [rows, layers, d] with {len(batch)} rows, got {h.shape}")
        return h

    def _centre(self, h: np.ndarray) -> CentredLayers:
        """Update the running mean with this step's rows; the rows centred by it, layer by layer."""
        n = h.shape[0]
        batch_mean = h.mean(axis=0, dtype=np.float64)
        if self.mean is None or self.mean.shape != batch_mean.shape:
            self.mean, self.mean_count = batch_mean, n
        else:
            total = self.mean_count + n
            self.mean = self.mean + (batch_mean - self.mean) * (n / total)
            self.mean_count = total
        return CentredLayers(h, self.mean)

    def admit(self, batch: RolloutBatch) -> np.ndarray:
        cfg = self.config
        feats = self._centre(self._features(batch))
        labeled = np.asarray(batch.labeled, bool)
        correct = np.asarray(batch.score, dtype=np.float64) > 0.5
        n_cor, n_inc = int((labeled & correct).sum()), int((labeled & ~correct).sum())
        groups = batch.groups()
        m: dict[str, float] = {"labeled_correct": n_cor, "labeled_incorrect": n_inc, "layers_total": feats.shape[1]}
        ready = batch.step > cfg.warmup_steps and min(n_cor, n_inc) >= cfg.min_per_class
        m["warmup"] = float(batch.step <= cfg.warmup_steps)
        refreshed = False
        if ready and (not self.layers or batch.step - self.refreshed_at >= cfg.refresh_every):
            lab = np.flatnonzero(labeled)
            a = heldout_aurocs(CentredLayers(feats.h[lab], self.mean), correct[lab], cfg.newton_steps, cfg.max_kappa)
            chosen = top_layers(a, cfg.top_layers)
            if chosen:  # no layer with a held-out AUROC: keep the previous choice
                self.layers, self.aurocs, self.refreshed_at, refreshed = chosen, [float(x) for x in a], batch.step, True
        m["layers_refreshed"] = float(refreshed)
        ready = ready and bool(self.layers)
        if self.layers:
            a = np.asarray(self.aurocs)
            fin = np.where(np.isfinite(a), a, np.nan)
            m.update({"layer/chosen": self.layers[0], "layer/count": len(self.layers),
                      "auroc/chosen": a[self.layers[0]], "auroc/chosen_mean": float(np.mean(a[self.layers])),
                      "auroc/best": float(np.nanmax(fin)), "auroc/worst": float(np.nanmin(fin)),
                      "layer/best": int(np.nanargmax(fin)), "layer/worst": int(np.nanargmin(fin))})
            m.update({f"auroc/layer_{layer}": a[layer] for layer in self.layers})

        # affinities of the unlabeled groups that have a majority to train against
        unl = [rows for rows in groups if not labeled[rows[0]]]
        with_target = [rows for rows in unl if str(batch.target[rows[0]])]
        aff: list[float] = []
        if ready:
            lab = labeled.copy()
            llr = np.zeros(len(batch))
            kappas = []
            for layer in self.layers:
                ll, fc, fi = layer_llr(feats[:, layer], correct, lab, cfg.newton_steps, cfg.max_kappa)
                llr += ll / len(self.layers)
                kappas.append((fc.kappa, fi.kappa))
            m["kappa/correct"], m["kappa/incorrect"] = kappas[0]
            for rows in with_target:
                maj = correct[rows]  # scored > 0.5 against the substituted majority answer
                aff.append(affinity(llr[rows[maj]], llr[rows[~maj]]))
        mix = None
        if aff:
            pool = np.asarray(list(self.buffer) + aff)
            m["mixture/points"] = len(pool)
            if len(pool) >= cfg.min_mixture_points:
                mix = reliable_posteriors(pool, cfg.seed)
            self.buffer.extend(aff)
            m["affinity/mean"] = float(np.mean(aff))
        if mix is not None:
            w = mix.posterior[-len(aff):]
            m.update({"mixture/weight_reliable": mix.weights[0], "mixture/weight_other": mix.weights[1],
                      "mixture/mean_reliable": mix.means[0], "mixture/mean_other": mix.means[1],
                      "mixture/std_reliable": mix.stds[0], "mixture/std_other": mix.stds[1]})
            keep, weight = keep_and_weight(w, cfg.keep_above, cfg.band_low, cfg.band_high)
        else:
            w = np.full(len(with_target), np.nan)
            keep, weight = np.zeros(len(with_target), bool), np.ones(len(with_target))
        m["ready"] = float(mix is not None)

        self._decided = {str(batch.uid[rows[0]]): (True, 1.0) for rows in groups if labeled[rows[0]]}
        for rows in unl:
            self._decided[str(batch.uid[rows[0]])] = (False, 1.0)
        by_uid: dict[str, tuple[float | None, float | None]] = {}
        for i, rows in enumerate(with_target):
            uid = str(batch.uid[rows[0]])
            self._decided[uid] = (bool(keep[i]), float(weight[i]))
            by_uid[uid] = (aff[i] if aff else None, None if np.isnan(w[i]) else float(w[i]))
        adm_unl = [rows for rows in unl if self._decided[str(batch.uid[rows[0]])][0]]
        m.update({"unlabeled_groups": len(unl), "scored_groups": len(aff),
                  "admitted_share/labeled": 1.0 if len(groups) > len(unl) else 0.0,
                  "admitted_share/unlabeled": len(adm_unl) / len(unl) if unl else 0.0,
                  "weight/mean": float(np.mean([self._decided[str(batch.uid[r[0]])][1] for r in adm_unl]))
                  if adm_unl else 0.0,
                  "weight/banded": int(sum(self._decided[str(batch.uid[r[0]])][1] < 1.0 for r in adm_unl))})
        self.log(**m)
        for rows in groups:
            uid = str(batch.uid[rows[0]])
            if uid in self._visits:
                key, visit = self._visits[uid]
                a_, w_ = by_uid.get(uid, (None, None))
                self.evidence(key, visit, affinity=a_, posterior=w_, admitted=self._decided[uid][0],
                              weight=self._decided[uid][1])
        self._visits = {}
        return np.array([self._decided[str(u)][0] for u in batch.uid], dtype=bool)

    def advantage_weights(self, batch: RolloutBatch) -> np.ndarray:
        return np.array([self._decided.get(str(u), (True, 1.0))[1] for u in batch.uid], dtype=np.float64)

    # ------------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        # plain lists: a state compares with == (the resume tests compare states that way)
        # a layer without a held-out AUROC is NaN, stored as None: NaN != NaN would make a restored state
        # unequal to the saved one
        return {"mean": None if self.mean is None else self.mean.tolist(), "mean_count": self.mean_count,
                "layers": list(self.layers), "aurocs": [None if math.isnan(x) else x for x in self.aurocs],
                "refreshed_at": self.refreshed_at,
                "buffer": list(self.buffer)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = None if state["mean"] is None else np.asarray(state["mean"], dtype=np.float64)
        self.mean_count = int(state["mean_count"])
        self.layers = [int(x) for x in state["layers"]]
        self.aurocs = [math.nan if x is None else float(x) for x in state["aurocs"]]
        self.refreshed_at = int(state["refreshed_at"])
        self.buffer = deque((float(x) for x in state["buffer"]), maxlen=self.config.buffer_size)
