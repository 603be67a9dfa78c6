"""TTRL (Zuo et al., 2025): the majority answer of a group is the pseudo target of its unlabeled rows.

Votes cluster equivalent answers (``0.5`` and ``\\frac{1}{2}`` vote together); responses without an
answer abstain; a tie or an agreement below ``min_agreement`` gives no pseudo target, so the group gets
no constructed reward (all rollouts score 0, zero GRPO advantage). Labeled rows keep their gold target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.online.method import MethodConfig, OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch


@dataclass
class TTRLConfig(MethodConfig):
    min_agreement: float = 0.0  # majority ratio below this -> no pseudo target


@WeakTrainerInterface.register
class TTRL(OnlineMethod):
    name = "ttrl"
    config_class = TTRLConfig
    needs = frozenset({"unlabeled"})

    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        from devenus.verify import majority_vote

        new = np.full(len(batch), None, dtype=object)
        ratios, no_major = [], 0
        for rows in batch.groups():
            if batch.labeled[rows].all():
                continue
            vote = majority_vote([batch.pred[i] for i in rows], min_agreement=self.config.min_agreement)
            ratios.append(vote.majority_ratio)
            if vote.target is None:
                no_major += 1
                continue
            for i in rows:
                if not batch.labeled[i]:
                    new[i] = vote.target
        if ratios:
            self.log(majority_ratio=float(np.mean(ratios)), no_majority_share=no_major / len(ratios))
        return new
