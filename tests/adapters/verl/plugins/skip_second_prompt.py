"""A test-only pre-rollout filter, loaded through ``devenus.plugins``: it skips the second prompt of every
generation call (deterministic, stateless), so each step has a placeholder slot that refill must fill.
Method ``test_filtered_grpo`` is plain GRPO run by a trainer that carries this filter."""

import numpy as np

from devenus.adapters.verl.trainer import DeVenusTrainer
from devenus.online.registry import WeakTrainerInterface
from devenus.online.supervise.grpo import GRPO


class SkipSecondPrompt:
    def __init__(self):
        self.observed = 0

    def decide(self, keys, step, granule=1):
        skip = np.zeros(len(keys), bool)
        skip[1:2] = True
        return skip

    def observe(self, keys, zero_variance, mean_score, step):
        assert len(keys) == len(zero_variance) == len(mean_score)
        self.observed += len(keys)

    def pop_metrics(self):
        return {}

    def pop_evidence(self):
        return []

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        assert state == {}


class FilteringTrainer(DeVenusTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pre_rollout_filter = SkipSecondPrompt()


@WeakTrainerInterface.register(trainer="skip_second_prompt:FilteringTrainer")
class FilteredGRPO(GRPO):
    name = "test_filtered_grpo"
