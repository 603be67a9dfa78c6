"""The rules of one online step, verl-free: what happens to a method's answers before verl sees them.

The adapter builds a :class:`~devenus.online.rollouts.RolloutBatch` from verl's DataProto, asks
:class:`StepRules` for the step's decisions, and writes them back into verl's native contracts; it
decides nothing itself. The rules, in the order of the step::

    rollout -> (simulated noise redraw) -> S_y targets -> (drop vote-only rows) -> S_r rewards -> S_b admission -> S_a weights -> update

- A truncated response has no answer: its extracted answer is dropped before any method sees the
  batch, so it never votes, never agrees, never counts as correct against a hidden truth.
- Rows whose label is trusted keep their target, reward and an advantage weight of 1, unless the
  method declares ``may_change_labeled`` (label refinement); every refused proposal is counted.
- A substituted target is re-graded against the row's response (truncated: no answer, score 0).
- A reward of NaN keeps verl's reward for that row.
- Admission is constant within a group (whole groups are admitted or dropped); an update where no
  group is admitted is skipped.
- Advantage weights lie in [0, 1].
- S_r/S_b/S_a see S_y's outcome in the view (``target``, and ``constructed``: the rows whose new target
  was accepted); the adapter carries both to the late placement.
- S_r/S_b/S_a run right after the rollout, or after the actor's log-prob pass when the method's
  ``step_needs`` include something only that pass computes (:data:`~devenus.online.method.AFTER_LOG_PROB`).

Refinement methods (TraPO, GeoMin, OLR) add their rules here, never in the adapter. Metric names
(``devenus/...``) are defined here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from devenus.online import diagnostics as diag
from devenus.online.mechanism import MechanismMeter
from devenus.online.method import AFTER_LOG_PROB, OnlineMethod
from devenus.online.noise import REDRAW_FIELD, redraw_noisy_targets
from devenus.online.rollouts import RolloutBatch


@dataclass
class Targets:
    """S_y's outcome. ``view`` holds the training rows only, with their (possibly substituted) targets and
    scores; ``train_rows`` indexes them in the input (None: every row trains)."""

    view: RolloutBatch
    train_rows: np.ndarray | None
    constructed: np.ndarray  # object, per training row: the substituted target or None
    regraded: np.ndarray  # bool, per training row: its score changed (write it back): substituted or redrawn
    hidden: np.ndarray | None = None  # simulation truth per training row (diagnostics only; no method sees it)


@dataclass
class RowDecisions:
    """S_r / S_b / S_a outcomes per row; None = the surface left verl's values alone."""

    reward: np.ndarray | None = None  # float; applies where reward_rows is True
    reward_rows: np.ndarray | None = None  # bool
    admit: np.ndarray | None = None  # bool, constant within a group
    judged: np.ndarray | None = None  # bool per row: admission judged the group (None: all); metrics only
    weight: np.ndarray | None = None  # float in [0, 1]


def _default_grade(response: str, target: str, truncated: bool) -> float:
    from devenus.verify import grade

    return grade(response, target, truncated=truncated).score


class StepRules:
    """The decisions of one method's online steps. Holds the step's pending metrics until the update."""

    def __init__(self, method: OnlineMethod, grade: Callable[[str, str, bool], float] | None = None):
        self.method = method
        self._grade = grade or _default_grade
        self.metrics: dict[str, float] = {}
        self.mechanism = MechanismMeter(method.mechanism_metrics)

    # ------------------------------------------------------------------------------ what the adapter must provide
    @property
    def after_log_prob(self) -> bool:
        """Whether S_r/S_b/S_a wait for the actor's log-prob pass."""
        return bool(AFTER_LOG_PROB & self.method.step_needs)

    @property
    def decode_responses(self) -> bool:
        """Whether the view needs decoded responses (re-grading a substituted target needs them)."""
        return self.method.implements("construct_targets") or "responses" in self.method.step_needs

    def writable(self, view: RolloutBatch) -> np.ndarray:
        """Rows whose supervision the method may change."""
        return np.ones(len(view), bool) if self.method.may_change_labeled else ~np.asarray(view.labeled, bool)

    @staticmethod
    def without_truncated_answers(view: RolloutBatch) -> RolloutBatch:
        """A truncated response has no answer (it abstains from every vote)."""
        view.pred = [None if t else p for p, t in zip(view.pred, np.asarray(view.truncated, bool))]
        return view

    # ------------------------------------------------------------------------------ S_y
    def targets(self, view: RolloutBatch, train_rows: np.ndarray | None = None,
                hidden: np.ndarray | None = None) -> Targets:
        """Targets for the step: the method votes over every row (vote-only rows marked), then the
        training rows are kept and substituted targets re-graded where the method may change them.
        ``hidden`` (simulation truth, row-aligned with ``view``) feeds diagnostics only."""
        m = self.method
        view = self.without_truncated_answers(view)
        # simulated active noise first (devenus.online.noise): the method sees the redrawn label as given
        redrawn, noise_metrics = redraw_noisy_targets(view, self._grade)
        self.metrics.update(noise_metrics)
        given = view.target.copy()  # the labels the method sees (after a simulated redraw), for the mechanism metrics
        new = None
        if m.implements("construct_targets"):
            if train_rows is not None:
                view.fields["vote_only"] = ~np.asarray(train_rows, bool)
            new = m.construct_targets(view)
            if new is not None and len(new) != len(view):
                raise ValueError(f"{m.name}.construct_targets returned {len(new)} targets for {len(view)} rows")
        idx = None
        if train_rows is not None:
            idx = np.flatnonzero(train_rows)
            self.metrics["devenus/votes/per_prompt"] = len(view) / max(1, len(set(view.uid.tolist())))
            self.metrics["devenus/votes/extra_rows"] = len(view) - len(idx)
            view = view.select(idx)
            redrawn = redrawn[idx]
            given = given[idx]
            new = None if new is None else np.asarray(new, dtype=object)[idx]
            hidden = None if hidden is None else np.asarray(hidden, dtype=object)[idx]
        constructed = np.full(len(view), None, dtype=object)
        regraded = np.zeros(len(view), bool)
        accepted = None
        if new is not None:
            new = np.asarray(new, dtype=object)
            proposed = np.array([t is not None for t in new], dtype=bool)
            allowed = self.writable(view)
            accepted = np.where(proposed & allowed, new, None)
            self.metrics["devenus/target/labeled_protected"] = int((proposed & ~allowed).sum())
            if m.may_change_labeled:  # label refinement: how many given labels it overrode, and how well
                self.metrics.update(correction_metrics(view, accepted, hidden))
            for i in np.flatnonzero(proposed & allowed):
                constructed[i] = str(new[i])
                view.target[i] = constructed[i]
                view.score[i] = self._grade(view.response[i], constructed[i], bool(view.truncated[i]))
                regraded[i] = True
        if m.implements("construct_targets"):
            self.metrics.update(diag.target_metrics(view, constructed, hidden))
            self.metrics.update(diag.reward_truth_metrics(view, hidden))
        self.mechanism.targets(view, given, accepted, constructed, hidden)
        view.fields["constructed"] = regraded.copy()  # S_y's outcome, as S_r / S_b / S_a see it
        return Targets(view, idx, constructed, regraded | redrawn, hidden)  # both rewrite verl's scores

    # ------------------------------------------------------------------------------ S_r, S_b, S_a
    def row_surfaces(self, view: RolloutBatch, hidden: np.ndarray | None = None) -> RowDecisions:
        """S_r, then S_b and S_a on one view (rewards first: admission and weights may read them).
        ``hidden`` (simulation truth, row-aligned with ``view``) feeds the mechanism metrics only."""
        m = self.method
        view = self.without_truncated_answers(view)
        view.fields.pop(REDRAW_FIELD, None)  # simulation truth: the late view carries it again; no method sees it
        writable = self.writable(view)
        out = RowDecisions()
        if m.implements("construct_rewards"):
            r = m.construct_rewards(view)
            if r is not None:
                r = np.asarray(r, dtype=np.float64)
                if r.shape != (len(view),):
                    raise ValueError(f"{m.name}.construct_rewards returned shape {r.shape} for {len(view)} rows")
                rows = ~np.isnan(r) & writable  # NaN keeps verl's reward
                out.reward, out.reward_rows = np.where(rows, r, 0.0), rows
                view.score[rows] = r[rows]
        if m.implements("admit"):
            keep = group_mask(m.admit(view), view, f"{m.name}.admit")
            if keep is not None:
                groups = view.groups()
                self.metrics["devenus/groups/admitted"] = sum(bool(keep[g[0]]) for g in groups)
                self.metrics["devenus/groups/dropped"] = sum(not keep[g[0]] for g in groups)
                out.admit = keep
                out.judged = group_mask(m.admission_judged(view), view, f"{m.name}.admission_judged")
        if m.implements("advantage_weights"):
            w = m.advantage_weights(view)
            if w is not None:
                w = np.asarray(w, dtype=np.float64)
                if w.shape != (len(view),) or np.isnan(w).any() or (w < 0).any() or (w > 1).any():
                    raise ValueError(f"{m.name}.advantage_weights must return one weight in [0, 1] per row "
                                     f"({len(view)} rows)")
                out.weight = np.where(writable, w, 1.0)  # trusted rows keep w = 1
                self.metrics["devenus/adv_weight/mean"] = float(out.weight.mean())
        self.mechanism.rows(view, out.reward, out.reward_rows, out.admit, hidden, out.judged)
        return out

    # ------------------------------------------------------------------------------ before the update
    def before_update(self, admit: np.ndarray | None, labeled: np.ndarray, reward: np.ndarray,
                      advantage: np.ndarray, valid: np.ndarray, rows_dropped: int = 0) -> tuple[bool, dict[str, float]]:
        """(skip the update?, the step's metrics): per-row reward and mean advantage by label state,
        the method's own metrics under ``devenus/<name>/``, and everything pending since the rollout."""
        m = self.metrics
        if admit is not None:
            m["devenus/rows/dropped"] = int(rows_dropped)
        m.update(diag.by_label_state("devenus/reward", reward, labeled, valid))
        m.update(diag.by_label_state("devenus/advantage", advantage, labeled, valid))
        m.update({f"devenus/{self.method.name}/{k}": v for k, v in self.method.pop_metrics().items()})
        m.update(self.mechanism.pop())
        skip = admit is not None and not np.asarray(admit, bool).any()
        if skip:
            m["devenus/update_skipped"] = 1  # nothing admitted: no gradient step this time
        self.metrics = {}
        return skip, m

    def evidence_metrics(self, rows: list[dict]) -> dict[str, float]:
        """Mechanism metrics of the proposals among the step's evidence rows (the adapter hands over every
        step's rows, empty or not, right after popping them from the method)."""
        return self.mechanism.evidence(rows)


def correction_metrics(view: RolloutBatch, constructed: np.ndarray, hidden: np.ndarray | None) -> dict[str, float]:
    """Groups whose given label a refinement method overrides this step (``devenus/target/corrections``), and
    with simulation truth the share of them whose new target is the hidden answer (``.../correction_precision``)."""
    from devenus.verify import get_default_verifier

    v = get_default_verifier()
    fixed = [rows for rows in view.groups()
             if view.labeled[rows[0]] and constructed[rows[0]] is not None
             and not v.equivalent(str(constructed[rows[0]]), str(view.target[rows[0]]))]
    out: dict[str, float] = {"devenus/target/corrections": len(fixed)}
    right = [v.equivalent(str(constructed[r[0]]), str(hidden[r[0]])) for r in fixed
             if hidden is not None and hidden[r[0]] is not None]
    if right:
        out["devenus/target/correction_precision"] = float(np.mean(right))
    return out


def group_mask(values, batch: RolloutBatch, what: str) -> np.ndarray | None:
    """A method's per-row bools (None passes through): one per row, the same within each group."""
    if values is None:
        return None
    values = np.asarray(values, dtype=bool)
    if values.shape != (len(batch),):
        raise ValueError(f"{what} returned shape {values.shape} for {len(batch)} rows")
    for rows in batch.groups():
        if len(set(values[rows].tolist())) > 1:
            raise ValueError(f"{what} must be the same for every rollout of a group (sample {batch.key[rows[0]]})")
    return values
