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

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from devenus.online.method import MethodConfig, OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch


@dataclass
class VotingConfig(MethodConfig):
    """Keys shared by the voting methods (TTRL, Co-rewarding)."""

    min_agreement: float = 0.0  # majority ratio (largest cluster / votes, abstentions included) below this -> no target
    votes: int = 0  # N: votes per prompt; 0 = vote on the training rollouts only (N = M = rollout.n)
    vote_temperatures: list = field(default_factory=list)  # temperatures of the N - M extra votes (cycled); [] = rollout's own

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.min_agreement) <= 1.0:
            raise ValueError(f"min_agreement must lie in [0, 1], got {self.min_agreement}")
        if isinstance(self.votes, bool) or not isinstance(self.votes, int) or self.votes < 0:
            raise ValueError(f"votes must be an integer >= 0 (0 = rollout.n), got {self.votes!r}")
        temps = self.vote_temperatures
        if not isinstance(temps, (list, tuple)):
            raise ValueError(f"vote_temperatures must be a list, e.g. vote_temperatures=[0.6,1.2]; got {temps!r}")
        for t in temps:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
                raise ValueError(f"vote_temperatures must hold numbers >= 0 (0 = greedy), got {t!r}")
        self.vote_temperatures = [float(t) for t in temps]


def extra_vote_temperatures(config: VotingConfig, n: int) -> list[float | None]:
    """The N - M extra votes' temperatures (None = the rollout's own), validated against M = ``n``."""
    total = config.votes or n
    if total < n:
        raise ValueError(
            f"votes={config.votes} must be >= actor_rollout_ref.rollout.n={n}: vote on N, train on M <= N"
        )
    extra = total - n
    temps = config.vote_temperatures
    if temps and extra == 0:
        raise ValueError(
            f"vote_temperatures={temps} needs extra votes: set votes > actor_rollout_ref.rollout.n={n}"
        )
    return [temps[i % len(temps)] if temps else None for i in range(extra)]


class VoteStats:
    """Per-step vote diagnostics, logged under ``devenus/<method>/...``."""

    def __init__(self) -> None:
        self.ratios: list[float] = []
        self.sizes: list[int] = []
        self.no_majority = self.tie = self.low_agreement = self.no_answer = 0
        self.abstain = 0
        self.extra_agree: list[bool] = []  # vote-only rows: answer in the winning cluster
        self.train_agree: list[bool] = []

    def add(self, vote, vote_only: np.ndarray | None = None) -> None:
        self.ratios.append(vote.majority_ratio)
        self.sizes.append(len(vote.cluster_of))
        self.abstain += vote.n_abstain
        if vote.target is None:
            self.no_majority += 1
            if not vote.cluster_sizes:
                self.no_answer += 1
            elif vote.tie:
                self.tie += 1
            else:
                self.low_agreement += 1
        elif vote_only is not None and vote_only.any():
            agrees = np.asarray(vote.agrees, bool)
            self.extra_agree += agrees[vote_only].tolist()
            self.train_agree += agrees[~vote_only].tolist()

    def metrics(self) -> dict[str, float]:
        if not self.ratios:
            return {}
        g = len(self.ratios)
        out = {
            "majority_ratio": float(np.mean(self.ratios)),
            "no_majority_share": self.no_majority / g,
            "tie_share": self.tie / g,
            "low_agreement_share": self.low_agreement / g,
            "no_answer_share": self.no_answer / g,
            "abstain_share": self.abstain / max(1, sum(self.sizes)),
            "votes_per_group": float(np.mean(self.sizes)),
            "voted_groups": g,
        }
        if self.extra_agree:
            out["extra_vote_agreement"] = float(np.mean(self.extra_agree))
            out["train_vote_agreement"] = float(np.mean(self.train_agree))
        return out


def vote_only_mask(batch: RolloutBatch) -> np.ndarray:
    """Rows generated for voting only (see :meth:`OnlineMethod.extra_rollouts`)."""
    v = batch.fields.get("vote_only")
    return np.zeros(len(batch), bool) if v is None else np.asarray(v, bool)


class VotingMethod(OnlineMethod):
    """Shared plumbing: the vote-on-N hook and the voting config."""

    config_class = VotingConfig

    def extra_rollouts(self, n: int) -> Sequence[float | None]:
        return extra_vote_temperatures(self.config, n)

    def vote(self, batch: RolloutBatch, rows: np.ndarray):
        from devenus.verify import majority_vote

        return majority_vote([batch.pred[i] for i in rows], min_agreement=self.config.min_agreement)


@dataclass
class TTRLConfig(VotingConfig):
    pass


@WeakTrainerInterface.register
class TTRL(VotingMethod):
    name = "ttrl"
    config_class = TTRLConfig
    needs = frozenset({"unlabeled"})

    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        new = np.full(len(batch), None, dtype=object)
        vote_only = vote_only_mask(batch)
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
