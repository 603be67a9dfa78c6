"""What the refinement methods share (not a method itself): one visit's observation of a group, the
bounded per-sample history, the evidence rows a method hands to the adapter, and the probe hook. The
statistics of a history (slope, unique mode, answer equivalence) are in :mod:`devenus.signals`.

A *visit* is one step's group of rollouts for one sample (``extra_info.index``). Its observation:

- ``majority``: the unique majority answer of the group (:func:`devenus.verify.majority_vote`: equivalent
  answers cluster, abstentions count in the group size but never win); None on a tie or no answer.
- ``majority_pass_rate``: share of the group's rollouts in that majority cluster; 0 on a tie or no answer
  (the TraPO rule: a group without a unique majority has pass rate 0).
- ``target_pass_rate``: share of the group's training rollouts whose verifier score against the row's
  current target is > 0.5; None when the row has no target.

Memory per sample is bounded: a history keeps at most ``window`` visits (older ones are dropped, and the
evidence table keeps every visit for offline use).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from devenus.online.method import OnlineMethod
from devenus.online.rollouts import RolloutBatch
# the shared statistics live in signals/; re-exported here for the modules that still import them from
# this one (trapo2, nl_olr2, the probe adapter); new code imports devenus.signals
from devenus.signals.trajectory import EPS, ls_slope  # noqa: F401
from devenus.signals.votes import equivalent, unique_mode  # noqa: F401


@dataclass(frozen=True)
class Visit:
    step: int
    majority: str | None
    majority_pass_rate: float
    target_pass_rate: float | None
    target: str  # the row's current (given) target, "" when none
    labeled: bool

    def as_list(self) -> list:
        return [self.step, self.majority, self.majority_pass_rate, self.target_pass_rate, self.target, self.labeled]

    @classmethod
    def from_list(cls, v: list) -> "Visit":
        s, m, mp, tp, t, lab = v
        return cls(int(s), m, float(mp), None if tp is None else float(tp), str(t), bool(lab))


def observe_groups(batch: RolloutBatch) -> list[tuple[np.ndarray, Visit]]:
    """One :class:`Visit` per group of ``batch`` (in :meth:`RolloutBatch.groups` order), with its rows."""
    from devenus.verify import majority_vote

    vote_only = batch.vote_only
    out = []
    for rows in batch.groups():
        vote = majority_vote([batch.pred[i] for i in rows])
        mp = vote.majority_ratio if vote.target is not None else 0.0
        first = rows[0]
        target = str(batch.target[first])
        train = rows[~vote_only[rows]]
        tp = float(np.mean(np.asarray(batch.score[train]) > 0.5)) if target and len(train) else None
        out.append((rows, Visit(int(batch.step), vote.target, float(mp), tp, target, bool(batch.labeled[first]))))
    return out


class Histories:
    """Per-sample deques of the last ``window`` visits, keyed by ``extra_info.index``; picklable state."""

    def __init__(self, window: int):
        self.window = window
        self.by_key: dict[str, deque[Visit]] = {}
        self.visits: dict[str, int] = {}  # every visit ever, not only the window's

    def add(self, key: str, visit: Visit) -> deque[Visit]:
        h = self.by_key.setdefault(key, deque(maxlen=self.window))
        h.append(visit)
        self.visits[key] = self.visits.get(key, 0) + 1
        return h

    def state_dict(self) -> dict[str, Any]:
        return {"window": self.window, "visits": dict(self.visits),
                "by_key": {k: [v.as_list() for v in h] for k, h in self.by_key.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["window"]) != self.window:
            raise ValueError(f"checkpoint kept a window of {state['window']} visits, this run's config says {self.window}")
        self.visits = {str(k): int(v) for k, v in state["visits"].items()}
        self.by_key = {str(k): deque((Visit.from_list(v) for v in h), maxlen=self.window)
                       for k, h in state["by_key"].items()}


class RefineMethod(OnlineMethod):
    """A refinement method: keeps its evidence rows until the adapter takes them (:meth:`pop_evidence`)."""

    def __init__(self, config=None):
        super().__init__(config)
        self._evidence: list[dict[str, Any]] = []

    def evidence(self, key: str, visit: Visit, kind: str = "visit", **values: Any) -> None:
        self._evidence.append({
            "key": key, "step": visit.step, "kind": kind, "majority_answer": visit.majority,
            "majority_pass_rate": visit.majority_pass_rate, "target_pass_rate": visit.target_pass_rate,
            "values": values,
        })

    def pop_evidence(self) -> list[dict[str, Any]]:
        out, self._evidence = self._evidence, []
        return out

    def observe(self, batch: RolloutBatch) -> None:
        """A probe's rollouts are a visit like a training one: recorded exactly as S_y records a visit
        (histories, trajectories, evidence), and the targets it would construct are dropped."""
        self.construct_targets(batch)
