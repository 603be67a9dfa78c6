"""The typed config of ``devenus lifecycle CONFIG`` (YAML), checked whole at load: one clear error per problem.

```yaml
out_dir: runs/lifecycle          # relative paths: to the current directory
rounds: 2
method: trapo2                   # trapo2 (rule promote) or nl_olr2 (rule correct)
steps_per_round: 2
method_config: {}                # +devenus.method_config.<k>=<v> of every round's training
data:                            # D(0): a records Parquet (path), or derived from the testbed's train split
  path: null
  testbed: semi                  # semi: labels hidden (keep `fraction`); noisy: inactive noise at rho = `fraction`
  rows: 32
  fraction: 0.5
  seed: 0
train:
  prompts_per_step: 4
  rollouts_per_prompt: 4
  val_rows: 16                   # held-out questions per split (test_id, test_ood) for verl's validation
  val_n: 1
  probe_every_k_steps: 1         # devenus.probe.every_k_steps (0: no probe passes)
  probe_sample_size: 0
  overrides: []                  # any further devenus.train overrides
transition:
  thresholds: {}                 # the rule's thresholds (devenus transition --set)
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from devenus.config import Config, ConfigError, config_from_dict, load_file, option
from devenus.config import section as nested

# method -> the rule that applies its proposals: the rule registry's, read when a config is checked (the
# rule modules import torch, which `devenus --help` must not)
from devenus.transitions.rules import TransitionError, method_rules, rule_config



class LifecycleConfigError(ConfigError):
    """A lifecycle config that cannot run."""


class _Section(Config):
    """A part of the lifecycle YAML (errors name ``section.key`` and the YAML line that sets it)."""

    error: ClassVar[type[ConfigError]] = LifecycleConfigError


@dataclass(frozen=True)
class DataConfig(_Section):
    key_path: ClassVar[str] = "data"

    path: str | None = option(None, "D(0): a records Parquet (null: derived from the testbed's train split)")
    testbed: str = option("semi", "semi: labels hidden (keep `fraction`); noisy: inactive noise at rho = `fraction`",
                          choices=("semi", "noisy"))
    rows: int = option(32, "training rows taken from the testbed", ge=1)
    fraction: float = option(0.5, "semi: share of labels kept; noisy: share of targets replaced", gt=0.0, lt=1.0)
    seed: int = option(0, "seed of the derivation", ge=0)


@dataclass(frozen=True)
class TrainConfig(_Section):
    key_path: ClassVar[str] = "train"

    prompts_per_step: int = option(4, "prompts per training step", ge=1)
    rollouts_per_prompt: int = option(4, "rollouts per prompt (a group needs two)", ge=2)
    val_rows: int = option(16, "held-out questions per split (test_id, test_ood) for verl's validation", ge=1)
    val_n: int = option(1, "validation samples per question", ge=1)
    probe_every_k_steps: int = option(1, "devenus.probe.every_k_steps (0: no probe passes)", ge=0)
    probe_sample_size: int = option(0, "devenus.probe.sample_size (0: the whole pool)", ge=0)
    overrides: tuple[str, ...] = option((), "any further devenus.train overrides")


@dataclass(frozen=True)
class TransitionConfig(_Section):
    key_path: ClassVar[str] = "transition"

    thresholds: dict[str, Any] = option({}, "the rule's thresholds (devenus transition --set)")


@dataclass(frozen=True)
class LifecycleConfig(_Section):
    out_dir: str = option(help="where rounds, datasets and reports are written")
    rounds: int = option(2, "rounds of train -> evidence -> transition", ge=1)
    method: str = option("trapo2", "a method that proposes dataset changes (trapo2: rule promote, nl_olr2: correct)")
    steps_per_round: int = option(2, "training steps per round", ge=1)
    seed: int = option(0, "training seed", ge=0)
    method_config: dict[str, Any] = option({}, "+devenus.method_config.<k>=<v> of every round's training")
    data: DataConfig = nested(DataConfig)
    train: TrainConfig = nested(TrainConfig)
    transition: TransitionConfig = nested(TransitionConfig)

    @property
    def rule(self) -> str:
        return method_rules()[self.method]

    def check(self) -> None:
        if self.method not in method_rules():
            raise LifecycleConfigError(f"method must be one of {sorted(method_rules())} (a method that proposes dataset "
                                       f"changes), got {self.method!r} (set it with {self.override('method')})")
        from devenus.online.config import config_from_dict as method_config
        from devenus.online.registry import WeakTrainerInterface

        try:  # every round trains with it: a typo fails here, not in round 0's pre-flight
            method_config(WeakTrainerInterface.get(self.method).method_cls.config_class, self.method_config, self.method)
        except ConfigError as e:
            raise LifecycleConfigError(f"method_config: {e}") from None
        try:
            rule_config(self.rule, self.transition.thresholds)
        except TransitionError as e:
            raise LifecycleConfigError(f"transition.thresholds: {e}") from None


def parse_config(values: Any, base: Path | None = None) -> LifecycleConfig:
    """A :class:`LifecycleConfig` from the YAML document ``values``; relative paths resolve against ``base``."""
    if not isinstance(values, dict):
        raise LifecycleConfigError(f"a lifecycle config is a mapping, found {type(values).__name__}")
    cfg = config_from_dict(LifecycleConfig, values)
    base = base or Path.cwd()
    out = str((base / cfg.out_dir).resolve())
    data = cfg.data if cfg.data.path is None else dataclasses.replace(cfg.data, path=str((base / cfg.data.path).resolve()))
    return dataclasses.replace(cfg, out_dir=out, data=data)


def load_config(path: str | Path) -> LifecycleConfig:
    values = load_file(path, LifecycleConfigError)
    try:
        return parse_config(values)
    except LifecycleConfigError as e:
        raise LifecycleConfigError(f"{path}: {e}") from None
