"""The shared base of the confidence-reward methods (Intuitor, EMRL): not a method itself.

S_r = a per-response confidence score from the actor's log-prob pass, for unlabeled rows; a subclass
names its score (``score_name``, one of :data:`CONFIDENCE_SCORES`, from the signals in :mod:`devenus.signals`).
:class:`~devenus.signals.CollapseMonitor` watches for the classic failure (responses shrink while the
confidence keeps rising).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from devenus.online.config import MethodConfig, option
from devenus.online.method import OnlineMethod
from devenus.online.rollouts import RolloutBatch
from devenus.signals import (CollapseMonitor, auroc, mean_log_prob, mean_self_certainty, negative_mean_entropy,
                             sum_log_prob)

#: confidence score -> (the token statistic it reduces, its per-response reduction over the valid tokens)
CONFIDENCE_SCORES = {
    "self_certainty": ("self_certainty", mean_self_certainty),  # Intuitor: mean SC_t
    "neg_entropy": ("entropy", negative_mean_entropy),  # EMRL token-level: -mean H(p_t)
    "mean_logp": ("log_probs", mean_log_prob),  # EMRL trajectory-level: mean log p(y_t)
    "sum_logp": ("log_probs", sum_log_prob),  # EMRL sequence-level: the sequence log-probability
}


class MonitoredState:
    """A method that watches for confidence collapse: ``self.monitor``, a CollapseMonitor set up from its
    :class:`ConfidenceConfig` keys, whose state is the method's state (saved with checkpoints)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.monitor = CollapseMonitor(self.config.collapse_baseline_steps, self.config.collapse_length_ratio)

    def state_dict(self) -> dict[str, Any]:
        st = self.monitor.state_dict()
        return {"collapse_monitor": st} if st["lengths"] else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        unknown = set(state) - {"collapse_monitor"}
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown state keys {sorted(unknown)}")
        self.monitor.load_state_dict(state.get("collapse_monitor", {}))


@dataclass
class ConfidenceConfig(MethodConfig):
    collapse_baseline_steps: int = option(3, "steps whose mean response length is the collapse baseline", ge=1)
    collapse_length_ratio: float = option(0.5, "warn below this fraction of the baseline length while confidence rises",
                                          gt=0.0, le=1.0)


def token_stat(batch: RolloutBatch, name: str):
    """One of the batch's token statistics, with a clear error when the step did not compute it."""
    if name not in batch.token_stats:
        raise KeyError(f"token statistic {name!r} missing from the batch (have {sorted(batch.token_stats)}); "
                       f"the method must list what it needs in `step_needs`")
    return batch.token_stats[name]


def confidence_score(batch: RolloutBatch, name: str) -> np.ndarray:
    """The per-response confidence score ``name`` (:data:`CONFIDENCE_SCORES`) of every row."""
    stat, reduce = CONFIDENCE_SCORES[name]
    mask = token_stat(batch, "response_mask")
    return reduce(token_stat(batch, stat), mask)


class ConfidenceMethod(MonitoredState, OnlineMethod):
    """Labeled rows get NaN (the step keeps their verified reward anyway). GRPO normalises rewards per
    prompt group, and a group is wholly labeled or wholly unlabeled, so the two reward scales never mix
    within a group."""

    config_class = ConfidenceConfig
    data_needs = frozenset({"unlabeled"})
    step_needs = frozenset({"token_stats"})
    score_name = "confidence"
    mechanism_metrics = frozenset({"reward_auroc"})

    def sequence_score(self, batch: RolloutBatch) -> np.ndarray:
        return confidence_score(batch, self.score_name)

    def construct_rewards(self, batch: RolloutBatch) -> np.ndarray:
        score = np.asarray(self.sequence_score(batch), dtype=np.float64)
        if score.shape != (len(batch),):
            raise ValueError(f"{self.name}: {score.shape} scores for {len(batch)} rows")
        unl = ~np.asarray(batch.labeled, bool)
        valid = unl & ~np.isnan(score)
        metrics: dict[str, float] = {}
        if valid.any():
            s = score[valid]
            metrics.update({f"{self.score_name}/mean": s.mean(), f"{self.score_name}/std": s.std(),
                            f"{self.score_name}/min": s.min(), f"{self.score_name}/max": s.max(),
                            "scored_rows": int(valid.sum())})
            length = float(np.mean(np.asarray(batch.response_length)[valid]))
            metrics["response_length/mean"] = length
            metrics.update(self.monitor.update(length, float(s.mean())))
        lab = ~unl & ~np.isnan(score)
        if lab.any():  # confidence != correctness: how well does the score rank verified-correct answers?
            metrics[f"{self.score_name}/labeled_mean"] = float(score[lab].mean())
            a = auroc(score[lab], np.asarray(batch.score)[lab] > 0.5)
            if not np.isnan(a):
                metrics[f"{self.score_name}/labeled_auroc"] = a
        self.log(**metrics)
        return np.where(unl, score, np.nan)
