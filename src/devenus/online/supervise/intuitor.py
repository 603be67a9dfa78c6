"""Intuitor (Zhao et al., 2025, "Learning to Reason without External Rewards"): self-certainty as reward.

Per response token, ``SC_t = KL(U || p_t) = logsumexp(z_t) - mean_j z_t,j - log V`` (V = logits width);
the reward of an unlabeled response is the mean of SC_t over its valid tokens. SC_t comes from the
actor's existing log-prob forward pass (the adapter's engine extension, chunked over tokens), at the
same temperature as the old log-probs, like the reference code. Labeled rows keep their verified
reward. See docs/methods/intuitor.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from devenus.online.config import option
from devenus.online.registry import WeakTrainerInterface
from devenus.online.supervise.confidence_reward import ConfidenceConfig, ConfidenceMethod
from devenus.signals import DEFAULT_CHUNK_SIZE


@dataclass
class IntuitorConfig(ConfidenceConfig):
    chunk_size: int = option(DEFAULT_CHUNK_SIZE, "most tokens per chunk when the engine computes SC_t (a 128 MiB budget may lower it)", ge=1)


@WeakTrainerInterface.register
class Intuitor(ConfidenceMethod):
    name = "intuitor"
    config_class = IntuitorConfig
    step_needs = frozenset({"token_stats", "self_certainty"})
    score_name = "self_certainty"

    def logits_chunk_size(self) -> int:
        return self.config.chunk_size
