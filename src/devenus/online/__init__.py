"""Online supervision: the verl-free side of DE-Venus's training step.

A method is a small class implementing some of four surfaces over one step's grouped rollouts
(:class:`~devenus.online.rollouts.RolloutBatch`); the verl adapter calls them at the matching points of
verl's own step and writes the results back into verl's native contracts::

    rollout -> S_y construct_targets -> S_b admit -> S_r construct_rewards -> GRPO -> S_a advantage_weights

Methods are registered with :class:`~devenus.online.registry.WeakTrainerInterface`.
"""

import importlib

#: public name -> its module. Imported on first use (PEP 562), so that importing a light submodule such
#: as ``devenus.online.cli`` (every ``devenus`` command builds its parser from it) does not import torch
#: through the method base class (1.2 -> 0.2 CPU-s per `devenus --help`, measured on the 2-core machine).
_EXPORTS = {
    "MethodConfig": "devenus.online.config",
    "option": "devenus.online.config",
    "OnlineMethod": "devenus.online.method",
    "WeakTrainerInterface": "devenus.online.registry",
    "RolloutBatch": "devenus.online.rollouts",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
