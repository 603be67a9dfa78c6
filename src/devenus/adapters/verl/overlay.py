"""The ``devenus`` overlay of the training config, typed (:class:`DevenusConfig`) and read once
(:func:`check_overlay`): by ``devenus.train`` before Ray starts and by the task runner, which hands it
to the trainer. Nothing here imports verl or the rest of the adapter's entry point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from devenus.adapters.verl.cpu.launch import BACKENDS
from devenus.online.probe import ProbeConfig
from devenus.config import Config, ConfigError, config_from_dict, option, section
from devenus.online.budget import RolloutBudgetConfig
from devenus.online.collapse_guard import CollapseGuardConfig
from devenus.online.sampling.dynamic_sampling import DynamicSamplingConfig
from devenus.online.sampling.skipping import SkipConfig


#: where verl's task runner runs (``devenus.task_runner``): its own Ray actor, or the launching process
TASK_RUNNERS = ("ray", "driver")


class SetupError(RuntimeError):
    """A configuration or data problem found before training starts."""


# ----------------------------------------------------------------------------- the devenus overlay
#: the overlay's keys that configs/devenus_trainer.yaml sets (overridden without a ``+``)
_IN_TRAINER_YAML = ("backend", "method", "method_config", "plugins", "validate_data", "task_runner")


@dataclass
class DevenusConfig(Config):
    """Every ``devenus.*`` key of the training config (``configs/devenus_trainer.yaml``); a key not declared
    here is an error before Ray starts, not a setting nobody reads. The method's own keys are checked by
    its config class (``devenus.method_config``), once the method is known."""

    key_path: ClassVar[str] = "devenus"

    backend: str = option("auto", "auto, cpu or gpu (docs/cpu_backend.md)", choices=BACKENDS)
    method: str = option("grpo", "a method registered with WeakTrainerInterface (devenus methods)")
    method_config: dict[str, Any] = option({}, "the method's typed config (devenus methods NAME)")
    plugins: list[str] = option([], "modules imported before the method lookup (third-party methods)")
    validate_data: bool = option(True, "check train/val files against the record contract before Ray starts")
    task_runner: str = option("ray", "where verl's task runner runs: ray (its own actor) or driver",
                              choices=TASK_RUNNERS)
    probe: ProbeConfig = section(ProbeConfig, "probe passes (docs/trainer.md)")
    dynamic_sampling: DynamicSamplingConfig = section(DynamicSamplingConfig,
                                                      "drop zero-variance groups, refill (docs/sampling/dynamic_sampling.md)")
    skip: SkipConfig = section(SkipConfig, "skip prompts before rollout from their reward history "
                                           "(docs/sampling/skipping.md)")
    collapse_guard: CollapseGuardConfig = section(CollapseGuardConfig, "stop rule for label-free rewards (docs/sampling/collapse_guard.md)")
    budget: RolloutBudgetConfig = section(RolloutBudgetConfig, "stop at a rollout count, not a step count "
                                                               "(docs/trainer.md, \"Rollout budget\")")
    evidence_dir: str | None = option(None, "where evidence parts are written (null: <default_local_dir>/evidence)")
    round: int = option(0, "the lifecycle round the evidence belongs to", ge=0)

    @classmethod
    def override(cls, key: str, value: str = "<value>") -> str:
        return f"{'' if key in _IN_TRAINER_YAML else '+'}{cls.key(key)}={value}"


def check_overlay(config) -> DevenusConfig:
    """The composed ``devenus`` overlay, typed: an unknown key (``+devenus.metod=ttrl``: did you mean
    devenus.method?) or a bad value is a :class:`SetupError` naming the key path."""
    from omegaconf import OmegaConf

    raw = config.get("devenus")
    values = OmegaConf.to_container(raw, resolve=True) if raw is not None else {}
    try:
        return config_from_dict(DevenusConfig, values)
    except ConfigError as e:
        raise SetupError(str(e)) from None
