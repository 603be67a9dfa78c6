"""WeakTrainerInterface: method name -> method class and the trainer specialisation that runs it.

The registry is verl-free: trainers are named by import path and resolved only inside the adapter.
Adding a method = one module with its class and typed config, one ``@WeakTrainerInterface.register``,
one config file (``config/method/<name>.yaml``), tests and a doc page (docs/trainer.md, "Adding a method").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from devenus.online.config import config_from_dict
from devenus.online.method import OnlineMethod

DEFAULT_TRAINER = "devenus.adapters.verl.trainer:DeVenusTrainer"
_BUILTIN_MODULES = ("devenus.online.supervise", "devenus.online.refine")


@dataclass(frozen=True)
class MethodSpec:
    name: str
    method_cls: type[OnlineMethod]
    trainer: str = DEFAULT_TRAINER  # "module:Class", a subclass of the shared DeVenusTrainer

    def build(self, config: Mapping[str, Any] | None = None) -> OnlineMethod:
        return self.method_cls(config_from_dict(self.method_cls.config_class, config or {}, self.name))


class WeakTrainerInterface:
    _specs: dict[str, MethodSpec] = {}
    _loaded = False

    @classmethod
    def register(cls, method_cls: type[OnlineMethod] | None = None, *, trainer: str = DEFAULT_TRAINER) -> Callable:
        """Class decorator: ``@WeakTrainerInterface.register`` (or ``register(trainer="pkg.mod:Trainer")``)."""

        def deco(mc: type[OnlineMethod]) -> type[OnlineMethod]:
            if not mc.name:
                raise ValueError(f"{mc.__qualname__} has no name")
            if mc.name in cls._specs and cls._specs[mc.name].method_cls is not mc:
                raise ValueError(
                    f"method {mc.name!r} is already registered by {cls._specs[mc.name].method_cls.__qualname__}"
                )
            cls._specs[mc.name] = MethodSpec(mc.name, mc, trainer)
            return mc

        return deco(method_cls) if method_cls is not None else deco

    @classmethod
    def _load_builtins(cls) -> None:
        if not cls._loaded:
            for mod in _BUILTIN_MODULES:
                importlib.import_module(mod)
            cls._loaded = True

    @classmethod
    def get(cls, name: str) -> MethodSpec:
        cls._load_builtins()
        if name not in cls._specs:
            raise KeyError(f"unknown DE-Venus method {name!r}; registered methods: {', '.join(cls.names())}")
        return cls._specs[name]

    @classmethod
    def names(cls) -> list[str]:
        cls._load_builtins()
        return sorted(cls._specs)
