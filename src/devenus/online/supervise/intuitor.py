"""Intuitor (Zhao et al., 2025, "Learning to Reason without External Rewards"): self-certainty as reward.

Per response token, ``SC_t = KL(U || p_t) = logsumexp(z_t) - mean_j z_t,j - log V`` (V = logits width);
the reward of an unlabeled response is the mean of SC_t over its valid tokens. SC_t comes from the
actor's existing log-prob forward pass (the adapter's engine extension, chunked over tokens), at the
same temperature as the old log-probs, like the reference code. Labeled rows keep their verified
reward. See docs/methods/intuitor.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.confidence import (
    DEFAULT_CHUNK_SIZE,
    ConfidenceConfig,
    ConfidenceMethod,
    mean_self_certainty,
)


@dataclass
class IntuitorConfig(ConfidenceConfig):
    chunk_size: int = DEFAULT_CHUNK_SIZE  # tokens per chunk when the engine computes SC_t from the logits


@WeakTrainerInterface.register
class Intuitor(ConfidenceMethod):
    name = "intuitor"
    config_class = IntuitorConfig
    needs = frozenset({"token_stats", "self_certainty", "unlabeled"})
    score_name = "self_certainty"

    def sequence_score(self, batch: RolloutBatch) -> np.ndarray:
        return mean_self_certainty(self.token_stat(batch, "self_certainty"), self.token_stat(batch, "response_mask"))
