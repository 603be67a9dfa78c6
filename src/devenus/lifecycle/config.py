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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# method -> the rule that applies its proposals: the rule registry's, read when a config is parsed (the
# rule modules import torch, which `devenus --help` must not)
from devenus.transitions.rules import TransitionError, method_rules, rule_config


class LifecycleConfigError(ValueError):
    """A lifecycle config that cannot run."""


@dataclass(frozen=True)
class DataConfig:
    path: str | None = None
    testbed: str = "semi"
    rows: int = 32
    fraction: float = 0.5
    seed: int = 0


@dataclass(frozen=True)
class TrainConfig:
    prompts_per_step: int = 4
    rollouts_per_prompt: int = 4
    val_rows: int = 16
    val_n: int = 1
    probe_every_k_steps: int = 1
    probe_sample_size: int = 0
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class TransitionConfig:
    thresholds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class LifecycleConfig:
    out_dir: str
    rounds: int = 2
    method: str = "trapo2"
    steps_per_round: int = 2
    seed: int = 0
    method_config: dict[str, Any] = field(default_factory=dict)
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    transition: TransitionConfig = TransitionConfig()

    @property
    def rule(self) -> str:
        return method_rules()[self.method]


def _typed(cls, values: Any, where: str):
    if values is None:
        return cls()
    if not isinstance(values, dict):
        raise LifecycleConfigError(f"{where}: expected a mapping, found {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for k, v in values.items():
        if k not in fields:
            raise LifecycleConfigError(f"{where}.{k}: unknown key; known: {sorted(fields)}")
        kind = fields[k].type
        name = f"{where}.{k}".lstrip(".")
        if kind == "int":
            if isinstance(v, bool) or not isinstance(v, int):
                raise LifecycleConfigError(f"{name}: expected an integer, found {v!r}")
        elif kind == "float":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise LifecycleConfigError(f"{name}: expected a number, found {v!r}")
            v = float(v)
        elif kind in ("str", "str | None"):
            if not (isinstance(v, str) or (v is None and "None" in kind)):
                raise LifecycleConfigError(f"{name}: expected a string, found {v!r}")
        elif kind.startswith("tuple"):
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise LifecycleConfigError(f"{name}: expected a list of strings, found {v!r}")
            v = tuple(v)
        elif kind.startswith("dict"):
            if not isinstance(v, dict):
                raise LifecycleConfigError(f"{name}: expected a mapping, found {v!r}")
        out[k] = v
    return cls(**out)


def parse_config(values: Any, base: Path | None = None) -> LifecycleConfig:
    """A :class:`LifecycleConfig` from the YAML document ``values``; relative paths resolve against ``base``."""
    if not isinstance(values, dict):
        raise LifecycleConfigError(f"a lifecycle config is a mapping, found {type(values).__name__}")
    values = dict(values)
    if "out_dir" not in values:
        raise LifecycleConfigError("out_dir: required (where rounds, datasets and reports are written)")
    nested = {"data": DataConfig, "train": TrainConfig, "transition": TransitionConfig}
    parts = {k: _typed(c, values.pop(k, None), k) for k, c in nested.items()}
    cfg = _typed(LifecycleConfig, values, "")
    cfg = dataclasses.replace(cfg, **parts)
    if cfg.method not in method_rules():
        raise LifecycleConfigError(f"method: {cfg.method!r} proposes no dataset changes; one of {sorted(method_rules())}")
    for name, v, lo in (("rounds", cfg.rounds, 1), ("steps_per_round", cfg.steps_per_round, 1),
                        ("train.prompts_per_step", cfg.train.prompts_per_step, 1),
                        ("train.rollouts_per_prompt", cfg.train.rollouts_per_prompt, 2),
                        ("train.val_rows", cfg.train.val_rows, 1), ("train.val_n", cfg.train.val_n, 1),
                        ("train.probe_every_k_steps", cfg.train.probe_every_k_steps, 0),
                        ("train.probe_sample_size", cfg.train.probe_sample_size, 0), ("data.rows", cfg.data.rows, 1)):
        if v < lo:
            raise LifecycleConfigError(f"{name}: expected >= {lo}, found {v}")
    if cfg.data.path is None:
        if cfg.data.testbed not in ("semi", "noisy"):
            raise LifecycleConfigError(f"data.testbed: expected semi or noisy, found {cfg.data.testbed!r}")
        if not 0.0 < cfg.data.fraction < 1.0:
            raise LifecycleConfigError(f"data.fraction: expected in (0, 1), found {cfg.data.fraction}")
    try:
        rule_config(cfg.rule, cfg.transition.thresholds)
    except TransitionError as e:
        raise LifecycleConfigError(f"transition.thresholds: {e}") from None
    base = base or Path.cwd()
    out = str((base / cfg.out_dir).resolve())
    data = cfg.data if cfg.data.path is None else dataclasses.replace(cfg.data, path=str((base / cfg.data.path).resolve()))
    return dataclasses.replace(cfg, out_dir=out, data=data)


def load_config(path: str | Path) -> LifecycleConfig:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise LifecycleConfigError(f"{path}: no such config file")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise LifecycleConfigError(f"{path}: not YAML: {e}") from None
    try:
        return parse_config(values)
    except LifecycleConfigError as e:
        raise LifecycleConfigError(f"{path}: {e}") from None
