"""Offline transitions between dataset versions: D(k) + evidence of round k + a rule -> D(k+1) + manifest.

Names are imported on first use (PEP 562): a method module imports :mod:`devenus.transitions.rules`
for its rule's base class, and that must not pull the builder (records, pyarrow) into every trainer.
"""

import importlib

_EXPORTS = {"TransitionError": "devenus.transitions.rules", "TransitionRule": "devenus.transitions.rules",
            "TransitionResult": "devenus.transitions.build", "build_transition": "devenus.transitions.build"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'devenus.transitions' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
