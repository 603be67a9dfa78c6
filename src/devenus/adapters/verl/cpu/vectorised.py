"""How :mod:`.logprobs` and :mod:`.val_metrics` put their exact, vectorised versions of verl functions in place
of verl's, keeping verl's own for comparisons and fallbacks."""

from __future__ import annotations

import importlib
import logging
import sys

_VECTORISED = "_devenus_vectorised"  # marks a function this backend put in place of verl's


def rebind(module: str, name: str, fn, originals: list, also: tuple[str, ...] = ()) -> bool:
    """Rebind ``module.name`` to ``fn``, an exact, vectorised version of verl's function (idempotent), also in
    each already-imported module of ``also`` that imported the name; ``originals`` keeps verl's own function.
    Returns True if installed; an import failure only logs (never break the plugin's load over a speed-up)."""
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # logged by fn's own module, under its short name
        logging.getLogger(fn.__module__).debug("%s: not installed (%r)", fn.__module__.rpartition(".")[2], e)
        return False
    setattr(fn, _VECTORISED, True)
    current = getattr(mod, name)
    if not getattr(current, _VECTORISED, False):
        if not originals:
            originals.append(current)
        setattr(mod, name, fn)
    for other in also:
        imported = sys.modules.get(other)
        if imported is not None and getattr(imported, name, None) is originals[0]:
            setattr(imported, name, fn)
    return True


def verl_function(module: str, name: str, originals: list):
    """verl's own function that :func:`rebind` replaced (or will), for comparisons and fallbacks."""
    if not originals:
        originals.append(getattr(importlib.import_module(module), name))
    return originals[0]
