"""verl/Hydra command-line overrides read with Hydra's own parser, and written back as Hydra reads them.

``python -m devenus.train`` takes Hydra overrides (``key=value``, ``+key=value``, ``++key=value``,
``~key``). Whoever needs a value from such a list before Hydra composes it (the backend, the attention
kernel, a path to make absolute, the metrics tracker) reads it here, as Hydra will: a quoted value may hold
``=``, ``[a,b]`` is a list, ``'0'`` a string. :func:`hydra_value` writes a Python value back as override
text that parses to the same value. Arguments that start with ``-`` (Hydra's own flags, ``--cfg job``) are
not overrides and are left out.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from devenus.config import ConfigError

__all__ = ["Override", "OverrideError", "hydra_value", "last_value", "parse_override_line", "parse_overrides",
           "set_value"]


class OverrideError(ConfigError):
    """An override Hydra cannot read; one line naming it."""


@dataclass(frozen=True)
class Override:
    key: str  # the dotted key, without its prefix
    prefix: str  # "" (change), "+" (add), "++" (add or change) or "~" (delete)
    value: Any  # the value as Hydra reads it (None for a deletion without a value)
    line: str  # the override as given

    @property
    def delete(self) -> bool:
        return self.prefix == "~"


@functools.lru_cache(maxsize=1)
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


_PREFIX = {"CHANGE": "", "ADD": "+", "FORCE_ADD": "++", "DEL": "~"}


@functools.lru_cache(maxsize=4096)
def parse_override_line(line: str) -> Override:
    """One override, read by Hydra's parser; :class:`OverrideError` names it when Hydra cannot read it."""
    from hydra.errors import HydraException

    try:
        o = _parser().parse_override(line)
    except HydraException as e:
        raise OverrideError(f"override {line!r} is not one Hydra reads: {' '.join(str(e).split())[:300]}") from None
    key = o.key_or_group if o.package is None else f"{o.key_or_group}@{o.package}"
    return Override(key, _PREFIX[o.type.name], o.value(), line)


def parse_overrides(lines: Iterable[str]) -> list[Override]:
    """Every override of ``lines`` in order (arguments starting with ``-`` are Hydra flags: left out)."""
    return [parse_override_line(a) for a in lines if not a.startswith("-")]


def last_value(lines: Iterable[str], key: str, default: Any = None) -> Any:
    """The value the last override of ``key`` gives it (Hydra's rule: the last one wins); ``default`` when no
    override sets it or the last one deletes it."""
    value = default
    for o in parse_overrides(lines):
        if o.key == key:
            value = default if o.delete else o.value
    return value


def set_value(lines: Sequence[str], key: str, value: Any) -> list[str]:
    """``lines`` with ``key`` set to ``value``: the last override of ``key`` rewritten with its prefix kept, or a
    ``key=value`` appended when none sets it."""
    out = list(lines)
    parsed = [(i, parse_override_line(a)) for i, a in enumerate(out) if not a.startswith("-")]
    at = [(i, o) for i, o in parsed if o.key == key and not o.delete]
    if not at:
        return [*out, f"{key}={hydra_value(value)}"]
    i, o = at[-1]
    out[i] = f"{o.prefix}{key}={hydra_value(value)}"
    return out


def _reads_back(text: str) -> bool:
    try:
        return parse_override_line(f"k={text}").value == text
    except OverrideError:
        return False


_BARE = re.compile(r"[A-Za-z0-9_/.\-+%@:]+")


def hydra_value(value: Any) -> str:
    """Override text Hydra reads back as ``value``: a string bare where Hydra would read it unchanged as a
    string, else single-quoted; lists ``[a,b]``, mappings ``{k:v}``, ``null``, ``true``/``false``, numbers."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _BARE.fullmatch(text) and _reads_back(text):
        return text
    # Hydra's quoted strings: backslashes before a quote or at the end are doubled, quotes escaped
    return "'" + re.sub(r"(\\+)(?='|$)", r"\1\1", text).replace("'", "\\'") + "'"
