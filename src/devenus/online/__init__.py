"""Online supervision: the verl-free side of DE-Venus's training step.

A method is a small class implementing some of four surfaces over one step's grouped rollouts
(:class:`~devenus.online.rollouts.RolloutBatch`); the verl adapter calls them at the matching points of
verl's own step and writes the results back into verl's native contracts::

    rollout -> S_y construct_targets -> S_b admit -> S_r construct_rewards -> GRPO -> S_a advantage_weights

Methods are registered with :class:`~devenus.online.registry.WeakTrainerInterface`.
"""

from devenus.online.config import MethodConfig, option
from devenus.online.method import OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch

__all__ = ["MethodConfig", "OnlineMethod", "RolloutBatch", "WeakTrainerInterface", "option"]
