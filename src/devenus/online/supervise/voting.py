"""The shared base of the voting methods (TTRL, Co-rewarding I): not a method itself.

Votes cluster equivalent answers (:func:`devenus.verify.majority_vote`): abstentions (no answer, or a
truncated response) count in the group size but never win; a tie or an agreement below
``min_agreement`` gives no target. Vote on N, train on M: ``votes`` = N >= M = rollout.n.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from devenus.online.config import ConfigError, MethodConfig, option
from devenus.online.method import OnlineMethod
from devenus.online.rollouts import RolloutBatch


@dataclass
class VotingConfig(MethodConfig):
    min_agreement: float = option(0.0, "majority ratio (largest cluster / votes, abstentions included) below this "
                                       "-> no target", ge=0.0, le=1.0)
    votes: int = option(0, "N: votes per prompt; 0 = vote on the training rollouts only (N = M = rollout.n)", ge=0)
    vote_temperatures: list[float] = option([], "temperatures of the N - M extra votes (cycled; 0 = greedy); "
                                                "[] = the rollout's own", ge=0.0)


def extra_vote_temperatures(config: VotingConfig, n: int) -> list[float | None]:
    """The N - M extra votes' temperatures (None = the rollout's own), validated against M = ``n``."""
    total = config.votes or n
    if total < n:
        raise ConfigError(f"devenus.method_config.votes={config.votes} must be >= actor_rollout_ref.rollout.n={n}: "
                          f"vote on N, train on M <= N")
    extra = total - n
    temps = config.vote_temperatures
    if temps and extra == 0:
        raise ConfigError(f"devenus.method_config.vote_temperatures={temps} needs extra votes: set "
                          f"devenus.method_config.votes > actor_rollout_ref.rollout.n={n}")
    return [temps[i % len(temps)] if temps else None for i in range(extra)]


class VotingMethod(OnlineMethod):
    """The vote-on-N hook and the group vote."""

    config_class = VotingConfig

    def extra_rollouts(self, n: int) -> Sequence[float | None]:
        return extra_vote_temperatures(self.config, n)

    def vote(self, batch: RolloutBatch, rows: np.ndarray):
        from devenus.verify import majority_vote

        return majority_vote([batch.pred[i] for i in rows], min_agreement=self.config.min_agreement)
