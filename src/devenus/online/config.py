"""Typed method configs: :class:`MethodConfig` on the one config mechanism (:mod:`devenus.config`).

A method's config is a dataclass deriving from :class:`MethodConfig` whose fields are declared with
:func:`option`. Every error names the key the way a user types it (``+devenus.method_config.<key>``),
and ``devenus methods NAME`` prints the same path, type, default and help (:func:`describe`).
Cross-key rules go in :meth:`MethodConfig.check`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from devenus.config import Config, ConfigError, KeyDoc, describe, option, suggest
from devenus.config import config_from_dict as _from_dict

__all__ = ["KEY_PATH", "ConfigError", "KeyDoc", "MethodConfig", "OverlayConfig", "config_from_dict", "describe",
           "option"]

#: where a method's keys live in the training config (set with ``MethodConfig.override``)
KEY_PATH = "devenus.method_config"


class OverlayConfig(Config):
    """A config set on the training command line with Hydra's append, ``+<key_path>.<key>=<value>``: the
    method's config and the ``devenus`` overlay's sections (probe, dynamic_sampling, skip, collapse_guard, budget)."""

    @classmethod
    def override(cls, key: str, value: str = "<value>") -> str:
        return f"+{cls.key(key)}={value}"


@dataclass
class MethodConfig(OverlayConfig):
    """Base of every method's config; keys are declared with :func:`option`."""

    key_path: ClassVar[str] = KEY_PATH


def config_from_dict(config_cls: type[MethodConfig], values: Mapping[str, Any], method: str = "") -> MethodConfig:
    """Typed config from a plain mapping (what Hydra composed); unknown keys and bad values are
    :class:`ConfigError` naming the method, the key and the override to type."""
    known = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        hints = []
        for k in unknown:
            close = suggest(k, known)
            hints.append(config_cls.override(k) + (f" (did you mean {config_cls.override(close)}?)" if close else ""))
        raise ConfigError(f"unknown config key(s) for method {method!r}: {'; '.join(hints)}. "
                          f"Valid keys: {', '.join(known) or 'none'} (`devenus methods {method}` lists them with help)")
    try:
        return _from_dict(config_cls, dict(values))
    except ConfigError as e:
        raise ConfigError(f"method {method!r}: {e}") from None
