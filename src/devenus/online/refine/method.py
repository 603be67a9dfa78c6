"""The refinement methods' base class, :class:`RefineMethod` (the evidence rows a method hands to the
adapter, and the probe hook), and :class:`Histories`, the bounded per-sample history of visits it keeps
(:class:`HistoryMethod`: a method whose state is one).

One visit's observation of a group (:class:`devenus.online.rollouts.Visit`,
:func:`devenus.online.rollouts.observe_groups`) lives in the online core, since the adapter's probe pass
observes groups too and never imports a method package; the statistics of a history (slope, unique mode,
answer equivalence) are in :mod:`devenus.signals`.

Memory per sample is bounded: a history keeps at most ``window`` visits (older ones are dropped, and the
evidence table keeps every visit for offline use).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from devenus.online.method import OnlineMethod
from devenus.online.rollouts import RolloutBatch, Visit


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

    def propose(self, key: str, visit: Visit, rule, **values: Any) -> None:
        """A ``proposal`` evidence row for the offline rule class ``rule``, checked against the schema its
        builder reads it with (:meth:`devenus.transitions.rules.TransitionRule.proposal_fields`): a proposal
        the builder would refuse as corrupt is a bug here, raised at once."""
        from devenus.transitions.rules import proposal_problem

        self.evidence(key, visit, kind="proposal", rule=rule.name, **values)
        problem = proposal_problem(rule.proposal_fields(), self._evidence[-1])
        if problem is not None:
            self._evidence.pop()
            raise ValueError(f"{self.name}: proposal for key {key!r}: {problem[0]}: {problem[1]}")

    def pop_evidence(self) -> list[dict[str, Any]]:
        out, self._evidence = self._evidence, []
        return out

    def observe(self, batch: RolloutBatch) -> None:
        """A probe's rollouts are a visit like a training one: recorded exactly as S_y records a visit
        (histories, trajectories, evidence), and the targets it would construct are dropped."""
        self.construct_targets(batch)


class HistoryMethod(RefineMethod):
    """A refinement method whose state is one :class:`Histories` of the last ``config.window`` visits per sample."""

    def __init__(self, config=None):
        super().__init__(config)
        self.history = Histories(self.config.window)

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history.load_state_dict(state["history"])
