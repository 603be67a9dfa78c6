"""A deterministic stateful test method, loaded through ``devenus.plugins``: it drops every third group
it has ever seen, so its decisions depend on state carried across steps (and checkpoints)."""

import hashlib
from dataclasses import dataclass

import numpy as np

from devenus.online import MethodConfig, OnlineMethod, WeakTrainerInterface


@dataclass
class VisitCounterConfig(MethodConfig):
    pass


@WeakTrainerInterface.register
class VisitCounter(OnlineMethod):
    name = "test_visit_counter"
    config_class = VisitCounterConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.visits: dict[str, int] = {}
        self.seen = 0

    def admit(self, batch):
        keep = np.zeros(len(batch), bool)
        decisions = []
        for rows in batch.groups():
            key = str(batch.key[rows[0]])
            self.visits[key] = self.visits.get(key, 0) + 1
            self.seen += 1
            keep[rows] = self.seen % 3 != 0
            decisions.append(f"{key}:{self.visits[key]}:{bool(keep[rows[0]])}")
        digest = hashlib.sha1(",".join(sorted(decisions)).encode()).hexdigest()
        self.log(decision_digest=int(digest[:8], 16), total_visits=sum(self.visits.values()))
        return keep

    def state_dict(self):
        return {"visits": dict(self.visits), "seen": self.seen}

    def load_state_dict(self, state):
        self.visits, self.seen = dict(state["visits"]), int(state["seen"])
