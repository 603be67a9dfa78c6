"""One registry for every set of named, pluggable units (methods, rules, routers, signals, model and pool
sources, generators): name -> entry, an entry given directly or lazily as ``"module:attr"`` (imported on
first :meth:`Registry.get`, so listing the names imports nothing).

- ``register(name, entry)`` or ``@register(name)``: a second, different entry under a taken name is one
  :class:`RegistryError` line naming both places;
- ``get(name)``: the entry; an unknown name is one line with a did-you-mean and every known name;
- ``names()``: the sorted names (imports nothing).

stdlib only, at the bottom layer: any package may build on it.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any, Callable, Generic, Iterable, TypeVar

__all__ = ["Registry", "RegistryError", "where"]

T = TypeVar("T")


class RegistryError(KeyError, ValueError):
    """An unknown or doubly registered name; one line (``str()`` is the message, not its repr). A KeyError (a
    name looked up) and a ValueError (a bad name given), so callers catch it as either."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def where(entry: Any) -> str:
    """Where an entry is defined, as ``module:qualname`` (a lazy entry is already that string)."""
    if isinstance(entry, str):
        return entry
    module = getattr(entry, "__module__", None)
    qual = getattr(entry, "__qualname__", None)
    return f"{module}:{qual}" if module and qual else repr(entry)


class Registry(Generic[T]):
    """Named entries of one kind. ``kind`` names it in errors ("router", "rule"); ``error``: the exception
    class raised for an unknown name (a subclass of the caller's error type may be given; it must accept
    one message); ``check(name, entry)``: why a loaded entry is refused (None: accepted), run on
    registration and when a lazy entry is first imported; ``plural``: the kind's plural in messages;
    ``ordered``: :meth:`names` in registration order (where the order means something) instead of sorted."""

    def __init__(self, kind: str, *, plural: str | None = None, error: type[Exception] = RegistryError,
                 check: Callable[[str, T], str | None] | None = None, lazy: dict[str, str] | None = None,
                 ordered: bool = False):
        self.kind = kind
        self.ordered = ordered
        self.plural = plural or f"{kind}s"
        self.error = error
        self._check = check
        self._paths: dict[str, str] = {}
        self._entries: dict[str, T] = {}
        for name, path in (lazy or {}).items():
            self.register(name, path)

    # ------------------------------------------------------------------------------------- adding
    def register(self, name: str, entry: T | str | None = None):
        """Add ``entry`` under ``name`` (a ``"module:attr"`` string: imported on first use); without an
        entry, a decorator. Registering the same entry again is a no-op; a different one is an error."""
        if entry is None:
            def deco(obj: T) -> T:
                self.register(name, obj)
                return obj
            return deco
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r} for {where(entry)}")
        if name in self._entries and self._entries[name] is entry:
            return entry  # a lazy entry, imported, registering itself by its decorator
        path = where(entry)
        loaded = self._entries.get(name)
        if (loaded is not None and loaded is not entry) or (name in self._paths and self._paths[name] != path):
            raise RegistryError(f"{self.kind} {name!r} is registered twice: by {self._paths[name]} and by {path}")
        if not isinstance(entry, str):
            self._accept(name, entry)
            self._entries[name] = entry
        self._paths[name] = path
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests, a plugin's teardown)."""
        self._paths.pop(name, None)
        self._entries.pop(name, None)

    def _accept(self, name: str, entry: T) -> None:
        why = self._check(name, entry) if self._check else None
        if why:
            raise ValueError(f"{self.kind} {name!r} ({where(entry)}): {why}")

    # ------------------------------------------------------------------------------------ reading
    def names(self) -> list[str]:
        return list(self._paths) if self.ordered else sorted(self._paths)

    def __contains__(self, name: object) -> bool:
        return name in self._paths

    def __iter__(self):
        return iter(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def path(self, name: str) -> str:
        """Where ``name``'s entry is defined (``module:attr``), without importing it."""
        self._known(name)
        return self._paths[name]

    def get(self, name: str) -> T:
        """The entry registered as ``name`` (a lazy one imported now)."""
        self._known(name)
        if name not in self._entries:
            module, _, attr = self._paths[name].partition(":")
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            self._accept(name, obj)
            self._entries[name] = obj
        return self._entries[name]

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) for every name (imports the lazy ones)."""
        return [(n, self.get(n)) for n in self.names()]

    def unknown(self, name: Any, known: Iterable[str] | None = None) -> str:
        """The one-line message for an unknown ``name``: a did-you-mean and the known names."""
        known = list(self.names() if known is None else known)
        close = difflib.get_close_matches(str(name), known, n=1)
        return (f"unknown {self.kind} {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; the {self.plural}: {', '.join(known) or 'none'}")

    def _known(self, name: str) -> None:
        if name not in self._paths:
            raise self.error(self.unknown(name))
