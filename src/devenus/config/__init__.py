"""One config mechanism for everything a user types (the config files DE-Venus ships are data, in
:mod:`devenus.configs`).

A config is a dataclass deriving from :class:`Config` whose keys are declared with :func:`option` (default,
one line of help, bounds, choices) or :func:`section` (a nested config). Types come from the annotations:
``bool``, ``int``, ``float``, ``str``, ``X | None``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``,
``Any`` and another :class:`Config` (a nested section, built from a mapping; a list of them, each built
from one). Checked on construction:
the type (a bool is not an int; an int is a float), bounds (NaN and inf are never a number), choices,
unknown keys (with a did-you-mean), required keys; then :meth:`Config.check` for rules across keys.
Every error is one :class:`ConfigError` line naming the full key path and what was expected, and how to
set the key (:meth:`Config.override`). :func:`load_file` and :func:`apply_overrides` read a YAML/JSON file
and dotted ``KEY=VALUE`` overrides into the mapping :func:`config_from_dict` builds a config from.

stdlib only (PyYAML imported when a file or an override is read): the CLI builds its parser from these
types without importing torch. See docs/config.md.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import math
import operator
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping

__all__ = ["Config", "ConfigError", "KeyDoc", "apply_overrides", "arg_type", "config_from_dict", "describe",
           "load_config_file", "load_file", "option", "parse_override", "section", "suggest"]


class ConfigError(ValueError):
    """A config that cannot run; one line naming the key path, what was expected and how to set it."""


def option(default: Any = dataclasses.MISSING, help: str = "", *, choices: Iterable | None = None,
           ge: float | None = None, le: float | None = None, gt: float | None = None, lt: float | None = None,
           length: int | None = None) -> Any:
    """A config key: its default (none: the key is required), one line of help, and the checks its value
    must pass. Bounds and choices apply to each item of a list and to each value of a mapping."""
    meta = {"help": help, "choices": tuple(choices) if choices is not None else None,
            "ge": ge, "le": le, "gt": gt, "lt": lt, "length": length}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: copy.deepcopy(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(config_cls: type, help: str = "") -> Any:
    """A nested config (its own keys, defaults and checks): set from a mapping, errors name ``parent.key``."""
    return dataclasses.field(default_factory=lambda: config_cls.variant({})(), metadata={"help": help})


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


class Config:
    """Base of every typed config. Subclasses are dataclasses (frozen or not) with keys from :func:`option`.

    ``key_path``: where the keys live, the prefix every error names (``devenus.method_config``,
    ``generate``; empty for a file's top level). ``error``: the :class:`ConfigError` subclass raised.
    :meth:`override` says what the user types to set a key; subclasses set all three.
    """

    key_path: ClassVar[str] = ""
    error: ClassVar[type[ConfigError]] = ConfigError

    @classmethod
    def override(cls, key: str, value: str = "<value>") -> str:
        """What the user types to set ``key`` (relative to ``key_path``): by default a YAML file's line."""
        parent, _, leaf = _join(cls.key_path, key).rpartition(".")
        return f"`{leaf}: {value}`" + (f" under `{parent}:`" if parent else "")

    @classmethod
    def key(cls, name: str) -> str:
        """The full path of key ``name`` (for messages of :meth:`check`)."""
        return _join(cls.key_path, name)

    def __post_init__(self) -> None:
        cls = type(self)
        hints = _hints(cls)
        for f in dataclasses.fields(self):
            value = _field_value(cls, f.name, hints[f.name], f.metadata, getattr(self, f.name))
            object.__setattr__(self, f.name, value)  # the coerced value; also on frozen configs
        self.check()

    def check(self) -> None:
        """Rules across keys; raise ``self.error`` naming the keys (:meth:`key`, :meth:`override`)."""

    @classmethod
    def variant(cls, values: Mapping[str, Any]) -> type:
        """The class a section's ``values`` are built as: a section whose keys depend on one of its values
        (``route:`` on its ``selector``) returns the subclass that value names; by default the class itself."""
        return cls

    @classmethod
    def owner(cls, values: Mapping[str, Any]) -> str:
        """Whose keys these are, for the unknown-key message ("the 'ratio' router"; empty: the section's)."""
        return ""


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional(tp) -> tuple[Any, bool]:
    """(the type without ``None``, whether ``None`` is allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(args) < len(typing.get_args(tp)):
            return args[0], True
    return tp, False


def _is_section(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, Config)


def _type_name(tp) -> str:
    inner, optional = _optional(tp)
    if optional:
        return f"{_type_name(inner)} | None"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        return f"list[{_type_name(args[0]) if args else 'any'}]"
    if origin is dict:
        return f"dict[{_type_name(args[0])}, {_type_name(args[1])}]" if args else "dict"
    if tp is Any:
        return "any"
    if _is_section(tp):
        return "section"
    return getattr(tp, "__name__", str(tp))


#: bound key -> (its sign in messages, the test a value within it passes)
_BOUNDS = {"gt": (">", operator.gt), "ge": (">=", operator.ge), "lt": ("<", operator.lt), "le": ("<=", operator.le)}


def _bounds(meta: Mapping[str, Any]) -> str:
    return " and ".join(f"{sign} {meta[key]}" for key, (sign, _) in _BOUNDS.items() if meta.get(key) is not None)


def _check_scalar(tp, value, meta: Mapping[str, Any]) -> tuple[Any, str | None]:
    """(the value, coerced where lossless; what was expected, or None)."""
    if tp is Any:
        return value, None
    if tp is bool:
        return value, None if isinstance(value, bool) else "a bool (true/false)"
    bounds = f" {_bounds(meta)}" if _bounds(meta) else ""
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return value, "an integer" + bounds
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value, "a number" + bounds
        value = float(value)
        if not math.isfinite(value):
            return value, "a finite number" + bounds
    elif not isinstance(value, tp):
        return value, "a string" if tp is str else f"a {_type_name(tp)}"
    if tp in (int, float) and any(meta.get(k) is not None and not ok(value, meta[k]) for k, (_, ok) in _BOUNDS.items()):
        return value, f"{'an integer' if tp is int else 'a number'}{bounds}"
    if meta.get("choices") is not None and value not in meta["choices"]:
        return value, f"one of {list(meta['choices'])}"
    return value, None


class _Bad(Exception):
    """What a value should have been (turned into a :class:`ConfigError` naming the key)."""


def _coerce(root: type, rel: str, tp, value, meta: Mapping[str, Any]):
    tp, optional = _optional(tp)
    if value is None and optional:
        return None
    if _is_section(tp):
        if isinstance(value, tp):
            return value
        if isinstance(value, Mapping):
            return _build(tp.variant(value), value, root, rel)
        raise _Bad("a mapping of keys")
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        item = args[0] if args else Any
        if not isinstance(value, (list, tuple)):
            plural = {str: "strings", int: "integers", float: "numbers", bool: "bools"}.get(item)
            raise _Bad(f"a list of {plural}" if plural else "a list")
        if meta.get("length") is not None and len(value) != meta["length"]:
            raise _Bad(f"a list of {meta['length']} items")
        if _is_section(item):  # a list of sections: each built on its own, errors name `key[i].sub`
            out = [_field_value(root, f"{rel}[{i}]", item, {}, v) for i, v in enumerate(value)]
        else:
            checked = [_check_scalar(item, v, meta) for v in value]  # (value, what was expected or None)
            error = next((e for _, e in checked if e), None)
            if error:
                raise _Bad(f"a list of items each {error}")
            out = [v for v, _ in checked]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        key_tp, value_tp = args if args else (Any, Any)
        if not isinstance(value, Mapping):
            raise _Bad("a mapping")
        out = {}
        for k, v in value.items():
            if _check_scalar(key_tp, k, {})[1]:
                raise _Bad(f"a mapping with {_type_name(key_tp)} keys")
            v, error = _check_scalar(value_tp, v, meta)
            if error:
                raise _Bad(f"a mapping of names to {error} ({k}: {v!r})")
            out[k] = v
        return out
    value, error = _check_scalar(tp, value, meta)
    if error:
        raise _Bad(error + (" or null" if optional else ""))
    return value


def _field_value(root: type, rel: str, tp, meta: Mapping[str, Any], value):
    try:
        return _coerce(root, rel, tp, value, meta)
    except _Bad as e:
        raise root.error(f"{_join(root.key_path, rel)} must be {e}, got {value!r} "
                         f"(set it with {root.override(rel)})") from None


def suggest(key: str, known: Iterable[str]) -> str | None:
    """The known key closest to a misspelt one (None: nothing close)."""
    close = difflib.get_close_matches(str(key), list(known), n=1)
    return close[0] if close else None


def _build(cls: type, values: Any, root: type, rel: str):
    where = _join(root.key_path, rel)
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise root.error(f"{where or 'a config'} must be a mapping of keys, got {type(values).__name__} {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in values if k not in fields]
    owner = cls.owner(values) if unknown else ""
    if owner:  # a section whose keys depend on a value: the first key that value's owner does not read
        k = unknown[0]
        close = suggest(k, fields)
        raise root.error(f"{_join(where, str(k))} is not a key of {owner}; its keys: {', '.join(fields)}"
                         + (f" (did you mean {_join(where, close)}?)" if close else ""))
    if unknown:
        items = []
        for k in unknown:
            close = suggest(k, fields)
            items.append(_join(where, str(k)) + (f" (did you mean {_join(where, close)}?)" if close else ""))
        raise root.error(f"unknown key{'s' if len(items) > 1 else ''} {', '.join(items)}; the keys "
                         f"{'of ' + where if where else 'at the top level'}: {', '.join(fields) or 'none'}")
    for f in fields.values():
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            k = _join(rel, f.name)
            raise root.error(f"{_join(root.key_path, k)} is required: {f.metadata.get('help') or 'no default'} "
                             f"(set it with {root.override(k)})")
    hints = _hints(cls)
    kwargs = {k: _field_value(root, _join(rel, k), hints[k], fields[k].metadata, v) for k, v in values.items()}
    return cls(**kwargs)


def config_from_dict(config_cls: type, values: Any, *, view: type | None = None):
    """A typed config from a plain mapping (a YAML document, Hydra's composed tree, ``--set`` overrides).

    ``view``: where the same keys are typed in another place (a class with ``key_path``, ``error`` and
    ``override``, e.g. a transition rule's ``--set NAME=VALUE``): errors name the key that way."""
    return _build(config_cls, values, view or config_cls, "")


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    key: str  # relative to the config's key_path (dotted for a nested section's keys)
    path: str  # the full key path
    type: str
    default: Any
    help: str
    allowed: str


def describe(config_cls: type, _root: str | None = None, _prefix: str = "") -> list[KeyDoc]:
    """Every key of a config class (a nested section's keys in turn): path, type, default, help, allowed."""
    root = config_cls.key_path if _root is None else _root
    hints = _hints(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        rel, tp, meta = _join(_prefix, f.name), hints[f.name], f.metadata
        if _is_section(tp):
            out += describe(tp, root, rel)
            continue
        allowed = f"one of {list(meta['choices'])}" if meta.get("choices") else _bounds(meta)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default, allowed = None, _join("required", allowed)
        out.append(KeyDoc(rel, _join(root, rel), _type_name(tp), default, meta.get("help", ""), allowed))
    return out


# ----------------------------------------------------------------------------- files and overrides
@functools.lru_cache(maxsize=None)
def _yaml_loader():
    """PyYAML's safe loader, reading ``1e-5`` as a number as YAML 1.2 and Hydra do (YAML 1.1 wants ``1.0e-5``
    and would make it the string '1e-5')."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"""^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$""",
                                                                        re.X), list("-+0123456789"))
    return Loader


def _yaml_load(text: str):
    import yaml

    return yaml.load(text, Loader=_yaml_loader())  # noqa: S506  (a SafeLoader subclass)


def _yaml_problem(e: Exception) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def load_file(path: str | Path, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """The mapping a YAML (or JSON) config file holds ({} for an empty file); a missing or unreadable file,
    bad YAML or a document that is not a mapping is one ``error`` line naming the file."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise error(f"{p}: no such config file")
    try:
        data = _yaml_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{p}: cannot read the config: {e}") from None
    except yaml.YAMLError as e:
        raise error(f"{p}: not valid YAML/JSON: {_yaml_problem(e)}") from None
    except RecursionError:
        raise error(f"{p}: not a config: nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{p}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def parse_override(text: str, error: type[ConfigError] = ConfigError) -> tuple[str, Any]:
    """``"KEY=VALUE"`` -> ``(KEY, VALUE parsed as a YAML scalar or flow value)``: ``4`` is an int,
    ``[a, b]`` a list, ``null`` None, anything else that parses a string."""
    import yaml

    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise error(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, _yaml_load(value)
    except yaml.YAMLError as e:
        raise error(f"{key}={value}: the value is not YAML: {_yaml_problem(e)}") from None


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any] | Iterable[str] | None,
                    error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """A copy of ``data`` with dotted overrides set: ``{"generate.samples": 4}`` or ``["generate.samples=4"]``."""
    out = copy.deepcopy(dict(data))
    if isinstance(overrides, Mapping):
        items = list(overrides.items())
    else:
        items = [parse_override(o, error) for o in overrides or ()]
    for dotted, value in items:
        parts = str(dotted).split(".")
        if not all(parts):
            raise error(f"{dotted!r} is not a dotted key (e.g. generate.samples)")
        d = out
        for i, p in enumerate(parts[:-1]):
            nxt = d.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise error(f"cannot set {dotted}: {'.'.join(parts[:i + 1])} holds {nxt!r}, not a section")
            d = nxt
        d[parts[-1]] = value
    return out


def load_config_file(config_cls: type, path: str | Path | None = None,
                     overrides: Mapping[str, Any] | Iterable[str] | None = None):
    """``config_cls`` from a YAML/JSON file (None: the defaults) plus dotted overrides; an error in the
    file's values names the file too."""
    err = config_cls.error
    data = load_file(path, err) if path is not None else {}
    data = apply_overrides(data, overrides, err)
    try:
        return config_from_dict(config_cls, data)
    except ConfigError as e:
        if path is None:
            raise
        raise type(e)(f"{path}: {e}") from None


def arg_type(tp: type, *, choices: Iterable | None = None, ge: float | None = None, le: float | None = None,
             gt: float | None = None, lt: float | None = None):
    """An argparse ``type=`` for a number flag, checked like a config key (NaN/inf refused, bounds):
    ``p.add_argument("--limit", type=arg_type(int, ge=1))`` -> ``argument --limit: must be an integer >= 1, got -5``."""
    import argparse

    meta = {"choices": tuple(choices) if choices is not None else None, "ge": ge, "le": le, "gt": gt, "lt": lt}

    def parse(text: str):
        try:
            value = tp(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {'an integer' if tp is int else 'a number'}, got {text!r}") from None
        value, error = _check_scalar(tp, value, meta)
        if error:
            raise argparse.ArgumentTypeError(f"must be {error}, got {text}")
        return value

    parse.__name__ = tp.__name__
    return parse
