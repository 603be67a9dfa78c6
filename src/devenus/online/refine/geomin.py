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
stable at order ~d/2 (all in :mod:`devenus.signals.vmf`). LLR_l(x) = log f_correct(x) - log f_incorrect(x).

Layers: every ``refresh_every`` steps (and whenever none is chosen yet), each layer is fitted on one
half of the labeled rollouts (per class, alternating in batch order) and scored by the AUROC of its LLR
for "correct" on the other half; the ``top_layers`` best are kept. LLR = the mean of their LLRs, with
fits on all of this step's labeled rollouts.

Unlabeled groups train against their unique majority answer (S_y; no majority: dropped). With M the
group's rollouts in the majority (scored > 0.5 against it) and m the others:
a = mean_{y in M} log sigmoid(LLR(y)) + mean_{y in m} log sigmoid(-LLR(y)) (first term only when m is
empty; M empty: no affinity, not admitted). A seeded 2-component 1-D Gaussian mixture is fitted to this step's affinities plus a buffer of
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

from devenus.online.config import ConfigError, MethodConfig, option
from devenus.online.refine.method import RefineMethod
from devenus.online.rollouts import RolloutBatch, observe_groups
from devenus.online.registry import WeakTrainerInterface
from devenus.signals.mixture import Mixture, log_sigmoid, reliable_posteriors
from devenus.signals.vmf import heldout_aurocs, top_layers, unit_rows, vmf_llr

#: the statistic the engine extension returns: [rows, layers, d] response-pooled hidden states
HIDDEN_POOLED = "hidden_pooled"


# ---------------------------------------------------------------------------------------- GeoMin's rules
# (the vMF math, the held-out AUROC and the mixture are shared: devenus.signals.vmf / .mixture)
class CentredLayers:
    """Pooled states ``h`` (n, L, d), read one layer at a time as centred unit rows in float64: the float64
    copy of a whole batch (n x L x d x 8 bytes, ~850 MB for 1024 rollouts of a 7B model) never exists."""

    def __init__(self, h: np.ndarray, mean: np.ndarray):
        self.h, self.mean = h, mean
        self.shape = h.shape

    def __getitem__(self, key) -> np.ndarray:
        rows, layer = key
        return unit_rows(self.h[rows, layer].astype(np.float64) - self.mean[layer])


def affinity(llr_majority: np.ndarray, llr_minority: np.ndarray) -> float | None:
    """mean over M of log sigmoid(LLR) + mean over m of log sigmoid(-LLR) (the second term only when m is
    not empty). None when M is empty (no rollout scored > 0.5 against the majority it trains on, e.g. when
    the grader and the vote disagree): the group has no affinity, so it is not admitted and never joins the
    mixture."""
    if not len(llr_majority):
        return None
    a = float(np.mean(log_sigmoid(llr_majority)))
    if len(llr_minority):
        a += float(np.mean(log_sigmoid(-np.asarray(llr_minority, dtype=np.float64))))
    return a


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
    mechanism_metrics = frozenset({"admission"})
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
        self._judged: set[str] = set()  # uids of the unlabeled groups the mixture gave a posterior this step

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
        """S_b, deciding S_a's weights with it: layers, LLR, affinities, mixture, then per group."""
        feats = self._centre(self._features(batch))
        labeled = np.asarray(batch.labeled, bool)
        correct = np.asarray(batch.score, dtype=np.float64) > 0.5
        m: dict[str, float] = {"layers_total": feats.shape[1], "layers_refreshed": 0.0}
        ready = self._fits_possible(batch, labeled, correct, m) and self._choose_layers(batch, feats, labeled, correct, m)
        if self.layers:
            self._layer_metrics(m)
        groups = batch.groups()
        unl = [rows for rows in groups if not labeled[rows[0]]]
        with_target = [rows for rows in unl if str(batch.target[rows[0]])]  # a majority to train against
        aff = self._affinities(feats, labeled, correct, with_target, m) if ready else [None] * len(with_target)
        w, keep, weight = self._posteriors(aff, m)
        self._decide(batch, groups, unl, with_target, aff, w, keep, weight, m)
        self.log(**m)
        self._visits = {}
        return np.array([self._decided[str(u)][0] for u in batch.uid], dtype=bool)

    def _fits_possible(self, batch: RolloutBatch, labeled: np.ndarray, correct: np.ndarray, m: dict) -> bool:
        """Past the warm-up, with enough labeled rollouts of each class for the vMF fits."""
        cfg = self.config
        n_cor, n_inc = int((labeled & correct).sum()), int((labeled & ~correct).sum())
        m.update({"labeled_correct": n_cor, "labeled_incorrect": n_inc, "warmup": float(batch.step <= cfg.warmup_steps)})
        return batch.step > cfg.warmup_steps and min(n_cor, n_inc) >= cfg.min_per_class

    def _choose_layers(self, batch: RolloutBatch, feats: CentredLayers, labeled: np.ndarray, correct: np.ndarray,
                       m: dict) -> bool:
        """Refresh the layer choice when due (held-out AUROC on this step's labeled rollouts; none with an
        AUROC keeps the previous choice); whether any layer is chosen."""
        cfg = self.config
        refreshed = False
        if not self.layers or batch.step - self.refreshed_at >= cfg.refresh_every:
            lab = np.flatnonzero(labeled)
            a = heldout_aurocs(CentredLayers(feats.h[lab], self.mean), correct[lab], cfg.newton_steps, cfg.max_kappa)
            chosen = top_layers(a, cfg.top_layers)
            if chosen:
                self.layers, self.aurocs, self.refreshed_at, refreshed = chosen, [float(x) for x in a], batch.step, True
        m["layers_refreshed"] = float(refreshed)
        return bool(self.layers)

    def _layer_metrics(self, m: dict) -> None:
        a = np.asarray(self.aurocs)
        fin = np.where(np.isfinite(a), a, np.nan)
        m.update({"layer/chosen": self.layers[0], "layer/count": len(self.layers),
                  "auroc/chosen": a[self.layers[0]], "auroc/chosen_mean": float(np.mean(a[self.layers])),
                  "auroc/best": float(np.nanmax(fin)), "auroc/worst": float(np.nanmin(fin)),
                  "layer/best": int(np.nanargmax(fin)), "layer/worst": int(np.nanargmin(fin))})
        m.update({f"auroc/layer_{layer}": a[layer] for layer in self.layers})

    def _affinities(self, feats: CentredLayers, labeled: np.ndarray, correct: np.ndarray,
                    with_target: list[np.ndarray], m: dict) -> list[float | None]:
        """The LLR (mean over the chosen layers, fits on all of this step's labeled rollouts), then one
        affinity per group in ``with_target`` (None: no rollout in its majority)."""
        cfg = self.config
        llr = np.zeros(feats.shape[0])
        kappas = []
        for layer in self.layers:
            ll, fc, fi = vmf_llr(feats[:, layer], correct, labeled, cfg.newton_steps, cfg.max_kappa)
            llr += ll / len(self.layers)
            kappas.append((fc.kappa, fi.kappa))
        m["kappa/correct"], m["kappa/incorrect"] = kappas[0]
        # rows of the majority: scored > 0.5 against the substituted majority answer
        return [affinity(llr[rows[correct[rows]]], llr[rows[~correct[rows]]]) for rows in with_target]

    def _posteriors(self, aff: list[float | None], m: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group of ``aff``: (posterior w, NaN where not fitted; admitted; weight). The mixture is fitted
        to this step's affinities plus the buffer's; groups without an affinity are not admitted."""
        cfg = self.config
        scored = [i for i, a in enumerate(aff) if a is not None]
        vals = [aff[i] for i in scored]
        w = np.full(len(aff), np.nan)
        keep, weight = np.zeros(len(aff), bool), np.ones(len(aff))
        mix: Mixture | None = None
        if vals:
            pool = np.asarray(list(self.buffer) + vals)
            m["mixture/points"] = len(pool)
            if len(pool) >= cfg.min_mixture_points:
                mix = reliable_posteriors(pool, cfg.seed)
            self.buffer.extend(vals)
            m["affinity/mean"] = float(np.mean(vals))
        if mix is not None:
            w[scored] = mix.posterior[-len(vals):]
            m.update({"mixture/weight_reliable": mix.weights[0], "mixture/weight_other": mix.weights[1],
                      "mixture/mean_reliable": mix.means[0], "mixture/mean_other": mix.means[1],
                      "mixture/std_reliable": mix.stds[0], "mixture/std_other": mix.stds[1]})
            keep[scored], weight[scored] = keep_and_weight(w[scored], cfg.keep_above, cfg.band_low, cfg.band_high)
        m["ready"] = float(mix is not None)
        return w, keep, weight

    def _decide(self, batch: RolloutBatch, groups: list[np.ndarray], unl: list[np.ndarray],
                with_target: list[np.ndarray], aff: list[float | None], w: np.ndarray, keep: np.ndarray,
                weight: np.ndarray, m: dict) -> None:
        """Per group (admitted, weight) for S_b and S_a; its metrics and evidence rows."""
        labeled = np.asarray(batch.labeled, bool)
        self._decided = {str(batch.uid[rows[0]]): (bool(labeled[rows[0]]), 1.0) for rows in groups}
        by_uid: dict[str, tuple[float | None, float | None]] = {}
        self._judged = set()
        for i, rows in enumerate(with_target):
            uid = str(batch.uid[rows[0]])
            self._decided[uid] = (bool(keep[i]), float(weight[i]))
            if not np.isnan(w[i]):
                self._judged.add(uid)
            by_uid[uid] = (aff[i], None if np.isnan(w[i]) else float(w[i]))
        admitted_weights = [wt for adm, wt in (self._decided[str(batch.uid[rows[0]])] for rows in unl) if adm]
        m.update({"unlabeled_groups": len(unl), "scored_groups": sum(a is not None for a in aff),
                  "admitted_share/labeled": 1.0 if len(groups) > len(unl) else 0.0,
                  "admitted_share/unlabeled": len(admitted_weights) / len(unl) if unl else 0.0,
                  "weight/mean": float(np.mean(admitted_weights)) if admitted_weights else 0.0,
                  "weight/banded": int(sum(x < 1.0 for x in admitted_weights))})
        for rows in groups:
            uid = str(batch.uid[rows[0]])
            if uid in self._visits:
                key, visit = self._visits[uid]
                a_, w_ = by_uid.get(uid, (None, None))
                self.evidence(key, visit, affinity=a_, posterior=w_, admitted=self._decided[uid][0],
                              weight=self._decided[uid][1])

    def admission_judged(self, batch: RolloutBatch) -> np.ndarray:
        """Labeled groups and the unlabeled ones given a posterior; in the warm-up, before the mixture has
        its points, or without an affinity a group is dropped without a decision."""
        return np.asarray(batch.labeled, bool) | np.array([str(u) in self._judged for u in batch.uid], dtype=bool)

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
