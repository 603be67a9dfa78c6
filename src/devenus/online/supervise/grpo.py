"""Plain GRPO on verified labels: every surface is the identity.

Unlabeled rows (target ``""``) score 0 in every rollout, so their groups get zero advantage: this is
"labeled-only GRPO" when the data mixes labeled and unlabeled rows.
"""

from devenus.online.method import OnlineMethod
from devenus.online.registry import WeakTrainerInterface


@WeakTrainerInterface.register
class GRPO(OnlineMethod):
    name = "grpo"
