"""EMRL (Agarwal et al., 2025, "The Unreasonable Effectiveness of Entropy Minimization in LLM
Reasoning"): the policy's own confidence as reward for unlabeled responses, in three variants:

- ``token_entropy``: reward = ``-mean_t H(p_t)`` (full-vocabulary entropy of each response token);
- ``trajectory``: reward = ``mean_t log p(y_t | y_<t, x)`` of the sampled tokens;
- ``sequence_prob``: reward = ``sum_t log p(y_t | y_<t, x)`` (the sequence log-probability).

verl's log-prob pass already returns per-token entropy and log-probs (at the rollout temperature), so
EMRL costs no extra computation. Labeled rows keep their verified reward. See docs/methods/emrl.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.online.config import option
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.confidence_reward import ConfidenceConfig, ConfidenceMethod, token_stat
from devenus.signals import mean_log_prob, negative_mean_entropy, sum_log_prob

VARIANTS = ("token_entropy", "trajectory", "sequence_prob")


@dataclass
class EMRLConfig(ConfidenceConfig):
    variant: str = option("token_entropy", "token_entropy (-mean H), trajectory (mean log p) or sequence_prob "
                                           "(sum log p)", choices=VARIANTS)


@WeakTrainerInterface.register
class EMRL(ConfidenceMethod):
    name = "emrl"
    config_class = EMRLConfig

    @property
    def score_name(self) -> str:  # metric prefix names what is scored
        return {"token_entropy": "neg_entropy", "trajectory": "mean_logp", "sequence_prob": "sum_logp"}[self.config.variant]

    def sequence_score(self, batch: RolloutBatch) -> np.ndarray:
        mask = token_stat(batch, "response_mask")
        if self.config.variant == "token_entropy":
            return negative_mean_entropy(token_stat(batch, "entropy"), mask)
        if self.config.variant == "trajectory":
            return mean_log_prob(token_stat(batch, "log_probs"), mask)
        return sum_log_prob(token_stat(batch, "log_probs"), mask)
