"""A rollout budget: a run stops once the rollouts it generated reach a count, not at a step count (verl-free).

Rollouts are ``devenus/rollouts/generated`` summed over the run's steps (training, refill and vote-only
rows), the cost that an arm which skips or refills spends differently per step. The run stops at the first
validation step (a multiple of ``trainer.test_freq``) at or after the sum reaches the budget, so the run's
last point is a validated one: verl's ``fit()`` validates a step after its update, and the stop takes
effect before the next step's generation (:mod:`devenus.adapters.verl.budget`). ``trainer.total_training_steps``
stays the most steps a run may take; a run that reaches it first ends there, as without a budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from devenus.config import option
from devenus.online.config import OverlayConfig

PREFIX = "devenus/budget"


@dataclass(frozen=True)
class RolloutBudgetConfig(OverlayConfig):
    key_path: ClassVar[str] = "devenus.budget"

    rollouts: int = option(0, "stop at the first validation step (trainer.test_freq multiple) at or after the "
                              "rollouts generated (devenus/rollouts/generated, summed over steps) reach this many; "
                              "0: off (trainer.total_training_steps is then the run's length, else its cap)",
                           ge=0, le=10**12)


def budget_stop(step: int, rollouts: float, budget: int, test_freq: int) -> bool:
    """Whether the run stops after ``step``, having generated ``rollouts`` in steps 1..step: the budget is on,
    reached, and ``step`` is a validation step. A budget without periodic validation (``test_freq`` <= 0)
    never stops a run (:func:`check_budget` refuses that setup before it starts)."""
    return budget > 0 and rollouts >= budget and test_freq > 0 and step % test_freq == 0


def check_budget(budget: int, test_freq: int) -> str | None:
    """Why a run cannot have this budget (one line), or None."""
    if budget > 0 and test_freq <= 0:
        return (f"{RolloutBudgetConfig.key('rollouts')}={budget} needs trainer.test_freq > 0: the run stops at a "
                f"validation step, and trainer.test_freq={test_freq} validates none before the last")
    return None
