"""TTRL (Zuo et al., 2025): the majority answer of a group is the pseudo target of its unlabeled rows.

Votes cluster equivalent answers (``0.5`` and ``\\frac{1}{2}`` vote together); responses without an
answer abstain (they count in the group size but never win); a tie between the largest clusters or an
agreement below ``min_agreement`` gives no pseudo target, so the group gets no constructed reward (all
rollouts score 0, zero GRPO advantage). Labeled rows keep their gold target (semi-supervised batches).

Vote on N, train on M (``votes`` = N >= M = ``actor_rollout_ref.rollout.n``): the method asks the
trainer for N - M extra generation-only rollouts per prompt (:meth:`extra_rollouts`); the vote pools
all N, the M training rollouts are kept by one aligned selection before the log-prob passes. With
``vote_temperatures`` the extra rollouts are sampled at those temperatures (cycled), an ensemble of
rollout sources pooled with equal weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.voting import VotingConfig, VotingMethod
from devenus.signals import VoteStats


@dataclass
class TTRLConfig(VotingConfig):
    pass


@WeakTrainerInterface.register
class TTRL(VotingMethod):
    name = "ttrl"
    mechanism_metrics = frozenset({"pseudo_target"})
    config_class = TTRLConfig
    data_needs = frozenset({"unlabeled"})

    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        new = np.full(len(batch), None, dtype=object)
        vote_only = batch.vote_only
        stats = VoteStats()
        for rows in batch.groups():
            if batch.labeled[rows].all():
                continue
            vote = self.vote(batch, rows)
            stats.add(vote, vote_only[rows])
            if vote.target is None:
                continue
            new[rows[~batch.labeled[rows]]] = vote.target
        self.log(**stats.metrics())
        return new
