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

from devenus.online.config import option
from devenus.online.registry import WeakTrainerInterface
from devenus.online.supervise.confidence_reward import ConfidenceConfig, ConfidenceMethod

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
    def score_name(self) -> str:  # the metric prefix and the score (CONFIDENCE_SCORES) of the variant
        return {"token_entropy": "neg_entropy", "trajectory": "mean_logp", "sequence_prob": "sum_logp"}[self.config.variant]
