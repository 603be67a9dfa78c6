"""Experiments on the testbed: one runner (paired arms and seeds, resumable, verl's file tracker), paired
Student-t statistics, and the registered experiment definitions ``devenus experiment NAME`` runs. See
experiments/README.md."""

import importlib

#: public name -> its module, imported on first use (PEP 562): every ``devenus`` command builds its parser
#: from :mod:`devenus.experiments.cli`, which should not pay for the runner's imports
_EXPORTS = {
    "Arm": "devenus.experiments.runner",
    "Experiment": "devenus.experiments.runner",
    "MixedResults": "devenus.experiments.provenance",
    "Mixing": "devenus.experiments.provenance",
    "Interval": "devenus.experiments.stats",
    "mean_interval": "devenus.experiments.stats",
    "paired_over_questions": "devenus.experiments.stats",
    "paired_over_seeds": "devenus.experiments.stats",
    "t_ppf": "devenus.experiments.stats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
