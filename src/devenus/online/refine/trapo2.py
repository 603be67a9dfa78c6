"""TraPO v2 (this framework's extension, persistent): promotion of unlabeled samples is an offline
transition (``devenus transition --rule promote``), never an edit during training.

Online, only labeled groups train (the labeled-only warm-up lasts the whole round); every visit of an
unlabeled sample is a generation-only observation (its group is dropped from the update, S_b): the
round's probes of that sample. It *proposes* a promotion (an evidence row of kind ``proposal``) when,
at this probe,

- the majority pass rate >= ``min_pass_rate`` (0.75),
- the least-squares slope of the majority pass rate over the last ``slope_probes`` probes > ``min_slope``
  (0.02, strict), and
- the majority answer is equivalent to the unique mode of its history, over >= ``min_probes`` (3) probes,
  of which >= ``min_answered`` (2) had a majority answer (probes without one are left out of the mode, so
  without this key ``[None, None, '7']`` would promote '7' on one answered probe).

NaN pass rates or slopes never pass (every threshold is a positive comparison); an empty history
proposes nothing. The offline rule ``promote`` (:class:`PromoteRule`, below) re-checks the same
thresholds (:func:`promotion_refusal`) on the numbers the proposal recorded.

Besides the sampler's visits, probe passes (``+devenus.probe.every_k_steps=K``: generation-only passes
over the unlabeled pool or a seeded sample of it) reach the method as visits; their evidence rows are
``kind=probe`` (docs/lifecycle.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from devenus.online.config import MethodConfig, option
from devenus.online.refine.method import HistoryMethod
from devenus.online.rollouts import RolloutBatch, Visit, observe_groups
from devenus.signals.trajectory import EPS, ls_slope
from devenus.signals.votes import equivalent, unique_mode
from devenus.online.registry import WeakTrainerInterface
from devenus.transitions.rules import RATE, SLOPE, Field, TransitionRule

RULE = "promote"


@dataclass
class PromotionThresholds(MethodConfig):
    """The keys a promotion is decided on whose numbers a proposal records: the online method's and,
    re-checked on the proposal, the offline rule ``promote``'s (``devenus transition --set``)."""

    min_pass_rate: float = option(0.75, "majority pass rate at this probe must be >= this", ge=0.0, le=1.0)
    min_slope: float = option(0.02, "slope of the majority pass rate over the last slope_probes probes must be > this",
                              ge=-1.0, le=1.0)
    min_answered: int = option(2, "probes of the history with a majority answer (the mode is taken over these) "
                                  "must be >= this", ge=1)


@dataclass
class TraPO2Config(PromotionThresholds):
    slope_probes: int = option(3, "probes the slope is fitted over", ge=2)
    min_probes: int = option(3, "probes of history the mode is taken over (fewer: no proposal)", ge=1)
    window: int = option(8, "probes kept per sample; bounds memory (>= slope_probes, min_probes, min_answered)", ge=2)

    def check(self) -> None:
        from devenus.online.config import ConfigError

        if self.window < max(self.slope_probes, self.min_probes, self.min_answered):
            raise ConfigError(f"devenus.method_config.window={self.window} must be >= slope_probes "
                              f"({self.slope_probes}), min_probes ({self.min_probes}) and min_answered "
                              f"({self.min_answered})")


def promotion_refusal(config: PromotionThresholds, pass_rate: float, slope: float, answered: int) -> str | None:
    """Why these numbers do not promote (None: they do). Positive comparisons, so NaN never passes."""
    if not pass_rate >= config.min_pass_rate - EPS:
        return f"majority pass rate {pass_rate} < min_pass_rate {config.min_pass_rate}"
    if not slope > config.min_slope + EPS:
        return f"slope {slope} <= min_slope {config.min_slope}"
    if not answered >= config.min_answered:
        return f"{answered} answered probe(s) < min_answered {config.min_answered}"
    return None


def answered_probes(history: list[Visit]) -> int:
    """Probes with a majority answer: the ones the mode is taken over."""
    return sum(v.majority is not None for v in history)


def promotion(history: list[Visit], config: TraPO2Config) -> tuple[str | None, float, str | None]:
    """(the answer to promote or None, slope over the last ``slope_probes``, mode), the current probe last;
    an empty history gives (None, 0.0, None)."""
    if not history:
        return None, 0.0, None
    cur = history[-1]
    slope = ls_slope([v.majority_pass_rate for v in history[-config.slope_probes:]])
    mode = unique_mode([v.majority for v in history])
    ok = (cur.majority is not None and len(history) >= max(config.min_probes, config.slope_probes)
          and promotion_refusal(config, cur.majority_pass_rate, slope, answered_probes(history)) is None
          and equivalent(mode, cur.majority))
    return (cur.majority if ok else None), slope, mode


@WeakTrainerInterface.register
class TraPO2(HistoryMethod):
    name = "trapo2"
    mechanism_metrics = frozenset({"promotion"})
    config_class = TraPO2Config
    data_needs = frozenset({"labels", "unlabeled"})

    def construct_targets(self, batch: RolloutBatch) -> None:
        proposed = probes = 0
        for rows, visit in observe_groups(batch):
            key = str(batch.key[rows[0]])
            if visit.labeled:  # every visit is evidence; only unlabeled samples have a history here
                self.evidence(key, visit)
                continue
            probes += 1
            h = list(self.history.add(key, visit))
            candidate, slope, mode = promotion(h, self.config)
            self.evidence(key, visit, slope=slope, mode=mode, probes=self.history.visits[key])
            if candidate is not None:
                proposed += 1
                self.propose(key, visit, PromoteRule, field="reward_model.ground_truth", before="",
                             after=candidate, slope=slope, mode=mode, probes=len(h), answered=answered_probes(h))
        self.log(probes=probes, promotions_proposed=proposed, tracked_samples=len(self.history.by_key))
        return None  # unlabeled rows get no target: they are dropped by admit()

    def admit(self, batch: RolloutBatch) -> np.ndarray:
        return np.asarray(batch.labeled, dtype=bool).copy()


class PromoteRule(TransitionRule):
    """Offline: an unlabeled row gets TraPO v2's proposed answer as its target (``label_source`` ->
    ``promoted``), if the proposal's recorded numbers pass :func:`promotion_refusal` under this config."""

    name = RULE
    method = TraPO2.name
    config_class = PromotionThresholds
    label_source = "promoted"
    # what construct_targets writes (its numbers' types and ranges); field, before, mode, probes: context
    proposal = {"majority_pass_rate": Field("number", RATE, column=True), "slope": Field("number", SLOPE),
                "answered": Field("integer", (0, None)), "probes": Field("integer", (0, None), required=False),
                "field": Field("text", required=False), "before": Field("text", required=False, blank=True),
                "mode": Field("text", required=False, blank=True)}

    def check(self, proposal: dict[str, Any], row: dict[str, Any]) -> str | None:
        if row["extra_info"].get("labeled"):
            return "the row is labeled already"
        v = proposal["values"]  # (of the declared types: the builder refused any other)
        return promotion_refusal(self.config, proposal["majority_pass_rate"], v["slope"], v["answered"])

    def fixable(self, row: dict[str, Any], truth: str, equivalent) -> bool:
        return not row["extra_info"]["labeled"]
