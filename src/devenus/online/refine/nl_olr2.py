"""NL-OLR v2 (this framework's extension of OLR, persistent): corrections become dataset edits only
offline, through ``devenus transition --rule correct``, never during training.

Online it trains against the given labels (no S_y edits) and observes every visit of a labeled
sample. It *proposes* a correction (an evidence row of kind ``proposal``) when, at this visit,

- the candidate (the group's unique majority answer) differs from the label,
- the candidate's pass rate (majority pass rate) >= ``min_candidate_pass_rate`` (0.75),
- the label's own pass rate <= ``max_label_pass_rate`` (0.25), and
- over each of the last ``margin_visits`` (3) visits the majority was the same candidate and beat the
  label's pass rate by >= ``min_margin`` (0.3).

NaN pass rates or margins never pass (every threshold is a positive comparison); an empty history
proposes nothing. The offline rule ``correct`` (:class:`CorrectRule`, below) re-checks the same
thresholds (:func:`correction_refusal`) on the numbers the proposal recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devenus.online.config import MethodConfig, option
from devenus.online.refine.method import HistoryMethod
from devenus.online.rollouts import RolloutBatch, Visit, observe_groups
from devenus.signals.trajectory import EPS
from devenus.signals.votes import equivalent
from devenus.online.registry import WeakTrainerInterface
from devenus.transitions.rules import MARGIN, RATE, Field, TransitionRule

RULE = "correct"


@dataclass
class CorrectionThresholds(MethodConfig):
    """The keys a correction is decided on whose numbers a proposal records: the online method's and,
    re-checked on the proposal, the offline rule ``correct``'s (``devenus transition --set``)."""

    min_candidate_pass_rate: float = option(0.75, "the candidate's majority pass rate at this visit must be >= this",
                                            ge=0.0, le=1.0)
    max_label_pass_rate: float = option(0.25, "the label's own pass rate at this visit must be <= this", ge=0.0, le=1.0)
    min_margin: float = option(0.3, "candidate pass rate minus label pass rate, required at each of the last "
                                    "margin_visits visits", ge=0.0, le=1.0)


@dataclass
class NLOLR2Config(CorrectionThresholds):
    margin_visits: int = option(3, "visits over which the same candidate must keep the margin", ge=1)
    window: int = option(8, "visits kept per sample; bounds memory (must be >= margin_visits)", ge=1)

    def check(self) -> None:
        from devenus.online.config import ConfigError

        if self.window < self.margin_visits:
            raise ConfigError(f"devenus.method_config.window={self.window} must be >= "
                              f"devenus.method_config.margin_visits={self.margin_visits}")


def correction_refusal(config: CorrectionThresholds, candidate_pass_rate: float, label_pass_rate: float,
                       margins: list[float]) -> str | None:
    """Why these numbers do not correct (None: they do). Positive comparisons, so NaN never passes."""
    if not candidate_pass_rate >= config.min_candidate_pass_rate - EPS:
        return f"candidate pass rate {candidate_pass_rate} < min_candidate_pass_rate {config.min_candidate_pass_rate}"
    if not label_pass_rate <= config.max_label_pass_rate + EPS:
        return f"label pass rate {label_pass_rate} > max_label_pass_rate {config.max_label_pass_rate}"
    if not (margins and all(m >= config.min_margin - EPS for m in margins)):
        return f"margins {margins} not all >= min_margin {config.min_margin}"
    return None


def correction_proposal(history: list[Visit], config: NLOLR2Config) -> tuple[str | None, list[float]]:
    """(the proposed correction or None, the margins of the last ``margin_visits`` visits), the current
    visit last; an empty history gives (None, [])."""
    if not history:
        return None, []
    cur = history[-1]
    last = history[-config.margin_visits:]
    margins = [v.majority_pass_rate - (v.target_pass_rate or 0.0) for v in last]
    if (not cur.labeled or cur.majority is None or cur.target_pass_rate is None
            or len(last) < config.margin_visits or equivalent(cur.majority, cur.target)):
        return None, margins
    ok = (all(v.target_pass_rate is not None and equivalent(v.majority, cur.majority) for v in last)
          and correction_refusal(config, cur.majority_pass_rate, cur.target_pass_rate, margins) is None)
    return (cur.majority if ok else None), margins


@WeakTrainerInterface.register
class NLOLR2(HistoryMethod):
    name = "nl_olr2"
    mechanism_metrics = frozenset({"proposed_correction"})
    config_class = NLOLR2Config
    data_needs = frozenset({"labels"})

    def construct_targets(self, batch: RolloutBatch) -> None:
        proposed = 0
        for rows, visit in observe_groups(batch):
            key = str(batch.key[rows[0]])
            if not visit.labeled:  # every visit is evidence; only labeled samples have a history here
                self.evidence(key, visit)
                continue
            h = list(self.history.add(key, visit))
            candidate, margins = correction_proposal(h, self.config)
            self.evidence(key, visit, label=visit.target, margins=margins)
            if candidate is not None:
                proposed += 1
                self.propose(key, visit, CorrectRule, field="reward_model.ground_truth", before=visit.target,
                             after=candidate, margins=margins, candidate_pass_rate=visit.majority_pass_rate,
                             label_pass_rate=visit.target_pass_rate)
        self.log(proposals=proposed, tracked_samples=len(self.history.by_key))
        return None  # observe only: training keeps the given labels


class CorrectRule(TransitionRule):
    """Offline: a labeled row's target is replaced by NL-OLR v2's proposed answer (``label_source`` ->
    ``corrected``), if the label is still the one the proposal was made against and the proposal's
    recorded numbers pass :func:`correction_refusal` under this config."""

    name = RULE
    method = NLOLR2.name
    config_class = CorrectionThresholds
    label_source = "corrected"
    # what construct_targets writes (its numbers' types and ranges); field: context
    proposal = {"before": Field("text", blank=True), "margins": Field("numbers", MARGIN),
                "candidate_pass_rate": Field("number", RATE), "label_pass_rate": Field("number", RATE),
                "field": Field("text", required=False)}

    def check(self, proposal: dict[str, Any], row: dict[str, Any]) -> str | None:
        v = proposal["values"]  # (of the declared types: the builder refused any other)
        gt = row["reward_model"]["ground_truth"]
        if not row["extra_info"].get("labeled"):
            return "the row is unlabeled (nothing to correct)"
        if v["before"] != gt:
            return f"the label changed since the proposal ({v['before']!r} -> {gt!r})"
        if v["after"] == gt:
            return "the proposal equals the label"
        return correction_refusal(self.config, v["candidate_pass_rate"], v["label_pass_rate"], v["margins"])

    def fixable(self, row: dict[str, Any], truth: str, equivalent) -> bool:
        return bool(row["extra_info"]["labeled"] and not equivalent(row["reward_model"]["ground_truth"], truth))
