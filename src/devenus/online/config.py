"""Typed method configs: one declaration per key (type, default, help, bounds), validated in one place.

A method's config is a dataclass deriving from :class:`MethodConfig` whose fields are declared with
:func:`option`. Types come from the annotations (``bool``, ``int``, ``float``, ``str``, ``list[float]``,
``list[str]``). Every error names the key the way a user types it (``+devenus.method_config.<key>``),
and ``devenus methods NAME`` prints the same path, type, default and help (:func:`describe`).
Cross-key rules go in :meth:`MethodConfig.check`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from dataclasses import dataclass
from typing import Any, Mapping

#: where a method's keys live in the training config, and the override that sets one
KEY_PATH = "devenus.method_config"


def override(key: str, value: str = "<value>") -> str:
    """The Hydra override that sets ``key`` of the method config on the command line."""
    return f"+{KEY_PATH}.{key}={value}"


class ConfigError(ValueError):
    """A method config that cannot run; the message names the key and the override to type."""


def option(default: Any, help: str, *, choices: tuple | None = None, ge: float | None = None,
           le: float | None = None, gt: float | None = None, length: int | None = None) -> Any:
    """A config key: its default, one line of help, and the checks its value must pass."""
    meta = {"help": help, "choices": choices, "ge": ge, "le": le, "gt": gt, "length": length}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return f"list[{getattr(item, '__name__', str(item))}]"
    return getattr(tp, "__name__", str(tp))


def _bounds(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta.get("gt") is not None:
        parts.append(f"> {meta['gt']}")
    if meta.get("ge") is not None:
        parts.append(f">= {meta['ge']}")
    if meta.get("le") is not None:
        parts.append(f"<= {meta['le']}")
    return " and ".join(parts)


def _check_scalar(tp, value, meta) -> tuple[Any, str | None]:
    """(the value, coerced where lossless; an error text or None)."""
    if tp is bool:
        return value, None if isinstance(value, bool) else "a bool (true/false)"
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return value, "an integer"
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value, "a number"
        value = float(value)
        if not math.isfinite(value):
            return value, "a finite number"
    elif tp is str:
        if not isinstance(value, str):
            return value, "a string"
    bad = ((meta.get("ge") is not None and value < meta["ge"]) or (meta.get("le") is not None and value > meta["le"])
           or (meta.get("gt") is not None and value <= meta["gt"]))
    if tp in (int, float) and bad:
        return value, f"{'an integer' if tp is int else 'a number'} {_bounds(meta)}"
    if meta.get("choices") is not None and value not in meta["choices"]:
        return value, f"one of {list(meta['choices'])}"
    return value, None


@dataclass
class MethodConfig:
    """Base of every method's config; keys are declared with :func:`option`."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            value, error = self._checked(f, hints[f.name], getattr(self, f.name))
            if error:
                raise ConfigError(f"{KEY_PATH}.{f.name} must be {error}, got {getattr(self, f.name)!r} "
                                  f"(set it with {override(f.name)})")
            setattr(self, f.name, value)
        self.check()

    @staticmethod
    def _checked(f: dataclasses.Field, tp, value) -> tuple[Any, str | None]:
        meta = f.metadata
        if typing.get_origin(tp) is list:
            (item,) = typing.get_args(tp) or (Any,)
            if not isinstance(value, (list, tuple)):
                return value, f"a list, e.g. {override(f.name, '[0.6,1.2]')}"
            if meta.get("length") is not None and len(value) != meta["length"]:
                return value, f"a list of {meta['length']} items"
            out = []
            for v in value:
                v, error = _check_scalar(item, v, meta)
                if error:
                    return value, f"a list of items each {error}"
                out.append(v)
            return out, None
        return _check_scalar(tp, value, meta)

    def check(self) -> None:
        """Rules across keys; raise :class:`ConfigError` naming the keys (see :func:`override`)."""


@dataclass(frozen=True)
class KeyDoc:
    key: str
    path: str
    type: str
    default: Any
    help: str
    allowed: str


def describe(config_cls: type[MethodConfig]) -> list[KeyDoc]:
    """Every key of a config class: path, type, default, help, allowed values."""
    hints = typing.get_type_hints(config_cls)
    default = config_cls()
    out = []
    for f in dataclasses.fields(config_cls):
        meta = f.metadata
        allowed = f"one of {list(meta['choices'])}" if meta.get("choices") else _bounds(meta)
        out.append(KeyDoc(f.name, f"{KEY_PATH}.{f.name}", _type_name(hints[f.name]), getattr(default, f.name),
                          meta.get("help", ""), allowed))
    return out


def config_from_dict(config_cls: type[MethodConfig], values: Mapping[str, Any], method: str = "") -> MethodConfig:
    """Typed config from a plain mapping (what Hydra composed); unknown keys and bad values are
    :class:`ConfigError` naming the method, the key and the override to type."""
    known = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        hints = []
        for k in unknown:
            close = difflib.get_close_matches(k, known, n=1)
            hints.append(f"{override(k)}" + (f" (did you mean {override(close[0])}?)" if close else ""))
        raise ConfigError(f"unknown config key(s) for method {method!r}: {'; '.join(hints)}. "
                          f"Valid keys: {', '.join(known) or 'none'} (`devenus methods {method}` lists them with help)")
    try:
        return config_cls(**dict(values))
    except ConfigError as e:
        raise ConfigError(f"method {method!r}: {e}") from None
