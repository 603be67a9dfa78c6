"""WeakTrainerInterface: method name -> method class and the trainer specialisation that runs it.

The registry (on :mod:`devenus.registry`) is verl-free: trainers are named by import path and resolved only inside the adapter.
Adding a method = one module with its class and typed config, one ``@WeakTrainerInterface.register``,
one config file (``configs/method/<name>.yaml``), tests and a doc page (docs/trainer.md, "Adding a method").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from devenus.online.config import config_from_dict
from devenus.online.method import OnlineMethod
from devenus.registry import Registry

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
    #: method name -> method class, on the one registry helper; the trainer of each in ``_trainers``
    _methods: Registry[type[OnlineMethod]] = Registry("DE-Venus method")
    _trainers: dict[str, str] = {}
    _loaded = False

    @classmethod
    def register(cls, method_cls: type[OnlineMethod] | None = None, *, trainer: str = DEFAULT_TRAINER) -> Callable:
        """Class decorator: ``@WeakTrainerInterface.register`` (or ``register(trainer="pkg.mod:Trainer")``)."""

        def deco(mc: type[OnlineMethod]) -> type[OnlineMethod]:
            if not mc.name:
                raise ValueError(f"{mc.__qualname__} has no name")
            cls._methods.register(mc.name, mc)
            cls._trainers[mc.name] = trainer
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
        return MethodSpec(name, cls._methods.get(name), cls._trainers[name])

    @classmethod
    def names(cls) -> list[str]:
        cls._load_builtins()
        return cls._methods.names()
