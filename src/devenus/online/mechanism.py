"""Mechanism metrics: how good a method's supervision is, judged against the simulation's hidden truth.

The hidden truth is ``simulation.hidden_answer`` (the testbed keeps every question's answer there, a
noisy label keeps its true answer there, and ``devenus data hide-labels`` moves a hidden target there).
Besides the simulated noise redraw (:mod:`devenus.online.noise`, which must avoid the true answer), only
this module and :mod:`devenus.online.diagnostics` read it: never a method, a reward or an advantage. Real
data has no such column: the metrics are then not logged (one line says so, once).

Each method declares the metrics that apply to it in ``OnlineMethod.mechanism_metrics``
(:data:`MECHANISM_METRICS`); :class:`MechanismMeter`, held by :class:`devenus.online.step.StepRules`,
computes them per step under ``devenus/mechanism/<kind>/...``. Every ratio comes with the counts it
is made of (``.../<count>``), so a run's ratio is the sum of its steps' numerators over the sum of
their denominators. A ratio whose denominator is 0 is not logged. "Equal to the truth" means equivalent
for the default verifier; an answer of None is equivalent to nothing.

- ``pseudo_target`` (groups not wholly labeled): ``coverage`` = groups given a target / groups;
  ``precision`` = groups whose target is the hidden answer / groups given a target.
- ``reward_auroc`` (rows whose reward the method set): ``auroc`` of the reward for "the row's answer is
  the hidden answer" (:func:`devenus.signals.auroc`; not logged with one class only).
- ``admission`` (groups not wholly labeled): the group's pseudo label is its target after S_y, or, when
  it has none, its unique majority answer; ``admitted_precision`` / ``rejected_precision`` = groups whose
  pseudo label is the hidden answer among admitted / rejected groups with a pseudo label. A group the
  method dropped unjudged (``OnlineMethod.admission_judged``: a warm-up, no score) is counted as
  ``unjudged``, not rejected.
- ``correction`` (labeled groups, targets changed online by S_y): ``precision`` = changed labels that
  were truly wrong / changed labels; ``recall`` = truly wrong labels changed to the hidden answer / truly
  wrong labels seen. The given label is the one the method saw (after a simulated noise redraw).
- ``proposed_correction``: the same, for corrections proposed as evidence (``rule = correct``) instead of
  applied.
- ``promotion`` (unlabeled groups, promotions proposed as evidence, ``rule = promote``): ``precision`` =
  proposed answers that are the hidden answer / proposals; ``recall`` = right proposals / unlabeled
  groups seen.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import numpy as np

from devenus.online.rollouts import RolloutBatch

PREFIX = "devenus/mechanism"
MECHANISM_METRICS = frozenset({
    "pseudo_target", "reward_auroc", "admission", "correction", "proposed_correction", "promotion"})
#: the kinds judged on evidence rows (proposals), with the rule name their proposals carry (the ``RULE``
#: of :mod:`devenus.online.refine.nl_olr2` and :mod:`devenus.online.refine.trapo2`)
PROPOSAL_RULES = {"proposed_correction": "correct", "promotion": "promote"}
NO_TRUTH_NOTE = ("[devenus] mechanism metrics ({kinds}) are off: the training data has no "
                 "simulation.hidden_answer (real data)")


def _same(a: Any, b: Any) -> bool:
    from devenus.signals.votes import equivalent

    return equivalent(None if a in (None, "") else str(a), None if b in (None, "") else str(b))


def _majority(preds: Iterable[str | None]) -> str | None:
    from devenus.verify import majority_vote

    return majority_vote(list(preds)).target


# ------------------------------------------------------------------------------ per-kind counts (pure)
#: per kind, each ratio as (numerator count, denominator count); the counts are logged beside it
RATIOS = {
    "pseudo_target": {"coverage": ("given", "seen"), "precision": ("right", "given")},
    "promotion": {"precision": ("right", "given"), "recall": ("right", "seen")},
    "admission": {"admitted_precision": ("admitted_right", "admitted_labeled"),
                  "rejected_precision": ("rejected_right", "rejected_labeled")},
    "correction": {"precision": ("changed_wrong", "changed"), "recall": ("fixed", "wrong")},
    "proposed_correction": {"precision": ("changed_wrong", "changed"), "recall": ("fixed", "wrong")},
}


def summary(kind: str, c: Counter) -> dict[str, float]:
    """The counts of one kind and the ratios :data:`RATIOS` defines over them (a zero denominator: no ratio)."""
    names = set(c) | {n for pair in RATIOS[kind].values() for n in pair}
    out = {k: float(c[k]) for k in sorted(names)}
    for name, (num, den) in RATIOS[kind].items():
        if c[den]:
            out[name] = c[num] / c[den]
    return out


def answer_counts(answers: Iterable, truth: Iterable) -> Counter:
    """One entry per group: the answer it was given (a target or a proposal; None: none) and its hidden
    answer (None: not judged). Counts ``seen``, ``given`` and ``right`` (given and equal to the truth)."""
    c: Counter = Counter()
    for a, h in zip(answers, truth):
        if h is None:
            continue
        c["seen"] += 1
        c["given"] += a is not None
        c["right"] += a is not None and _same(a, h)
    return c


def pseudo_target_counts(view: RolloutBatch, constructed: np.ndarray, hidden: np.ndarray) -> Counter:
    """:func:`answer_counts` over the groups not wholly labeled, given their constructed targets."""
    firsts = [rows[0] for rows in view.groups() if not view.labeled[rows].all()]
    return answer_counts([constructed[r] for r in firsts], [hidden[r] for r in firsts])


def correct_rows(view: RolloutBatch, hidden: np.ndarray) -> np.ndarray:
    """Per row: 1.0 when its answer is the hidden answer, 0.0 when not, NaN without a hidden answer."""
    return np.array([np.nan if h is None else float(_same(p, h)) for p, h in zip(view.pred, hidden)])


def reward_auroc_metrics(reward: np.ndarray, correct: np.ndarray) -> dict[str, float]:
    from devenus.signals import auroc

    ok = ~np.isnan(correct) & ~np.isnan(reward)
    out = {"rows": float(ok.sum()), "correct": float(np.nansum(correct[ok]))}
    a = auroc(reward[ok], correct[ok] > 0.5) if ok.any() else float("nan")
    if not np.isnan(a):
        out["auroc"] = a
    return out


def admission_counts(view: RolloutBatch, keep: np.ndarray, hidden: np.ndarray,
                     judged: np.ndarray | None = None) -> Counter:
    """Unlabeled groups admitted / rejected; of those with a pseudo label (``_labeled``), how many are right.
    A group not admitted and not ``judged`` (None: all judged) is ``unjudged``: dropped without a decision."""
    c: Counter = Counter(admitted=0, rejected=0)
    for rows in view.groups():
        r = rows[0]
        if view.labeled[rows].all() or hidden[r] is None:
            continue
        if not keep[r] and judged is not None and not judged[r]:
            c["unjudged"] += 1
            continue
        side = "admitted" if keep[r] else "rejected"
        label = view.target[r] if view.target[r] not in (None, "") else _majority(view.pred[i] for i in rows)
        c[side] += 1
        c[f"{side}_labeled"] += label is not None
        c[f"{side}_right"] += label is not None and _same(label, hidden[r])
    return c


def correction_counts(given: Iterable, new: Iterable, truth: Iterable) -> Counter:
    """One entry per labeled group: its given label, the label the method changes it to (None: kept),
    its hidden answer (None: the group is not judged)."""
    c: Counter = Counter()
    for g, n, h in zip(given, new, truth):
        if h is None:
            continue
        wrong = not _same(g, h)
        changed = n is not None and not _same(n, g)
        c["seen"] += 1
        c["wrong"] += wrong
        c["changed"] += changed
        c["changed_wrong"] += changed and wrong
        c["fixed"] += changed and wrong and _same(n, h)
    return c


# ------------------------------------------------------------------------------ the step's meter
class MechanismMeter:
    """The mechanism metrics of one method's steps. The step rules hand it each step's view, decisions
    and hidden truth; :meth:`pop` returns the counts and ratios accumulated since the last pop (a step
    whose groups come in several generation rounds counts them all). Proposal kinds are judged when the
    adapter hands over the step's evidence rows (:meth:`evidence`)."""

    def __init__(self, kinds: frozenset[str]):
        unknown = set(kinds) - MECHANISM_METRICS
        if unknown:
            raise ValueError(f"unknown mechanism metrics {sorted(unknown)}; known: {sorted(MECHANISM_METRICS)}")
        self.kinds = frozenset(kinds)
        self._told = False
        self._counts: dict[str, Counter] = {}
        self._scores: list[tuple[np.ndarray, np.ndarray]] = []
        self._seen: dict[str, tuple[bool, str, Any]] = {}  # key -> (labeled, given label, hidden): for proposals

    def judged(self, hidden: np.ndarray | None) -> bool:
        """Whether this step can be judged: the method declares a metric and the data holds the truth."""
        if not self.kinds:
            return False
        if hidden is None and not self._told:
            print(NO_TRUTH_NOTE.format(kinds=", ".join(sorted(self.kinds))))
            self._told = True
        return hidden is not None

    def _add(self, kind: str, c: Counter) -> None:
        self._counts.setdefault(kind, Counter()).update(c)

    def targets(self, view: RolloutBatch, given: np.ndarray, new: np.ndarray | None, constructed: np.ndarray,
                hidden: np.ndarray | None) -> None:
        """After S_y: ``given`` the targets the method saw, ``new`` its accepted proposals per row (None:
        kept), ``constructed`` the substituted targets of the rows."""
        if not self.judged(hidden):
            return
        groups = view.groups()
        firsts = [rows[0] for rows in groups]
        if "pseudo_target" in self.kinds:
            self._add("pseudo_target", pseudo_target_counts(view, constructed, hidden))
        lab = [r for r in firsts if view.labeled[r]]
        if "correction" in self.kinds:
            self._add("correction", correction_counts(
                [given[r] for r in lab], [None if new is None else new[r] for r in lab], [hidden[r] for r in lab]))
        if self.kinds & set(PROPOSAL_RULES):
            for r in firsts:
                self._seen[str(view.key[r])] = (bool(view.labeled[r]), given[r], hidden[r])

    def rows(self, view: RolloutBatch, reward: np.ndarray | None, reward_rows: np.ndarray | None,
             keep: np.ndarray | None, hidden: np.ndarray | None, judged: np.ndarray | None = None) -> None:
        """After S_r / S_b: the rewards the method set (on ``reward_rows``), its admission and which groups
        admission judged (None: all)."""
        if not self.judged(hidden):
            return
        if "reward_auroc" in self.kinds and reward is not None and reward_rows.any():
            self._scores.append((np.asarray(reward, np.float64)[reward_rows], correct_rows(view, hidden)[reward_rows]))
        if "admission" in self.kinds and keep is not None:
            self._add("admission", admission_counts(view, keep, hidden, judged))

    def evidence(self, rows: list[dict[str, Any]]) -> dict[str, float]:
        """The proposal kinds, judged on the step's evidence rows against the groups seen since the last
        call; returns their metrics."""
        seen, self._seen = self._seen, {}
        out: dict[str, float] = {}
        for kind, rule in sorted(PROPOSAL_RULES.items()):
            if kind not in self.kinds or not seen:
                continue
            after = {str(e["key"]): (e.get("values") or {}).get("after") for e in rows
                     if e.get("kind") == "proposal" and (e.get("values") or {}).get("rule") == rule}
            keys = [k for k, (lab, _, _) in seen.items() if lab == (kind == "proposed_correction")]
            truth = [seen[k][2] for k in keys]
            if kind == "promotion":
                c = answer_counts([after.get(k) for k in keys], truth)
            else:
                c = correction_counts([seen[k][1] for k in keys], [after.get(k) for k in keys], truth)
            if c:
                out.update({f"{PREFIX}/{kind}/{k}": v for k, v in summary(kind, c).items()})
        return out

    def pop(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, c in self._counts.items():
            out.update({f"{PREFIX}/{kind}/{k}": v for k, v in summary(kind, c).items()})
        if self._scores:
            reward = np.concatenate([s[0] for s in self._scores])
            correct = np.concatenate([s[1] for s in self._scores])
            out.update({f"{PREFIX}/reward_auroc/{k}": v for k, v in reward_auroc_metrics(reward, correct).items()})
        self._counts, self._scores = {}, []
        return out
