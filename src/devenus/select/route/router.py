"""Selectors as registered units: a :class:`Router` turns per-question scores into decisions.

A router names itself, the score signals it needs, whether it annotates while routing (triage's
probes: the annotation source is then part of the route stage's identity), and implements
``route(inputs, info) -> (decisions, u)``. The pipeline's route stage looks the configured selector up
here and never branches on its name. Built-in routers live beside their rule (``intervals.py``,
``ratios.py``, ``triage.py``) and are named here by import path, so listing them (the config's choices)
imports none; :func:`register` adds one at run time. Adding a router: docs/adding_a_router.md.

The sign of an uncertainty is calibrated one way for every router (:func:`calibrate_sign`): on the
rows whose correctness is known (labeled rows, or triage's annotated probes), flip u when its AUROC for
"the majority answer is wrong" is below 0.5.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

#: selector name -> "module:Class"; imported on first :func:`get_router`
BUILTIN: dict[str, str] = {
    "interval": "devenus.select.route.intervals:IntervalRouter",
    "ratio": "devenus.select.route.ratios:RatioRouter",
    "triage": "devenus.select.route.triage:TriageRouter",
}
_paths: dict[str, str] = dict(BUILTIN)
_classes: dict[str, type["Router"]] = {}


@dataclass
class RouteInputs:
    """What a router sees: per-question columns (``u_<signal>``, ``pass_rate``, ``majority_correct``), the
    question keys, the ranking uncertainty ``u``, the seeded tie-breakers, the route config and (for routers
    that annotate while routing) ``probe_oracle(indices) -> (pass_rate, majority_correct, labels)``."""

    columns: dict[str, np.ndarray]
    keys: list[str]
    u: np.ndarray
    ties: np.ndarray
    config: Any  # devenus.select.config.RouteConfig
    probe_oracle: Callable | None = None


class Router:
    name: ClassVar[str] = ""
    #: score signals the router reads besides route.signal
    needs_signals: ClassVar[tuple[str, ...]] = ()
    #: annotates questions while routing (its probes); the annotation source joins the stage identity
    annotates_while_routing: ClassVar[bool] = False

    def check(self, config) -> str | None:
        """Why a :class:`~devenus.select.config.SelectConfig` cannot run this router (None: it can); at load.
        The base checks ``needs_signals``; a router with further rules extends it."""
        missing = [x for x in self.needs_signals if x not in config.score.signals]
        return f"route.selector={self.name} needs the {missing[0]} signal in score.signals" if missing else None

    def route(self, inputs: RouteInputs, info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(decision codes per question, u after any sign flip); adds what it decided by to ``info``."""
        raise NotImplementedError

    def ranks_by_signal(self, config) -> bool:
        """Whether the decisions depend on the order of ``route.signal`` (a router that does not rank under
        this config, e.g. interval routing without a budget, is not refused for a constant signal)."""
        return True

    @staticmethod
    def labeled_rows_sign(inputs: RouteInputs, info: dict[str, Any]) -> np.ndarray:
        """``u`` sign-calibrated on the labeled rows when ``route.calibrate_sign`` asks for it."""
        if not inputs.config.calibrate_sign:
            return inputs.u
        mc = inputs.columns.get("majority_correct")
        ok = np.isfinite(np.asarray(mc, dtype=np.float64)) if mc is not None else None
        if ok is None or not ok.any():
            raise ValueError("route.calibrate_sign needs labeled rows (majority_correct) in the pool, or the triage selector")
        return calibrate_sign(inputs.u, ok, np.asarray(mc, dtype=np.float64)[ok] == 0.0, "labeled rows", info)


def calibrate_sign(u: np.ndarray, rows: np.ndarray, wrong: np.ndarray, where: str, info: dict[str, Any]) -> np.ndarray:
    """``u``, negated when its AUROC for ``wrong`` (one entry per row of ``rows``: a mask or indices into
    ``u``) is below 0.5; records ``calibration_auroc``, ``calibration_rows``, ``calibration_on`` and ``sign``
    in ``info``."""
    from devenus.signals import auroc

    auc = auroc(u[rows], wrong)
    n = int(rows.sum()) if rows.dtype == bool else len(rows)
    info.update(calibration_auroc=auc, calibration_rows=n, calibration_on=where)
    if np.isfinite(auc) and auc < 0.5:
        info["sign"] = -1
        return -u
    return u


def signal_spread(u: np.ndarray) -> tuple[float, int]:
    """(max - min, number of distinct values) of ``u`` over its finite values ((0.0, 0) when none)."""
    u = np.asarray(u, dtype=np.float64)
    u = u[np.isfinite(u)]
    if not u.size:
        return 0.0, 0
    return float(u.max() - u.min()), int(np.unique(u).size)


def uninformative(u: np.ndarray, name: str, min_spread: float) -> str | None:
    """Why the routing signal ``name`` ranks nothing (None: it varies): fewer than 2 distinct finite values, or a
    spread (max - min) <= ``min_spread``. A pool of one question has nothing to rank and is not refused."""
    if len(u) < 2:
        return None
    spread, distinct = signal_spread(u)
    if distinct >= 2 and spread > min_spread:
        return None
    return (f"the routing signal {name!r} is {'constant' if distinct < 2 else 'near-constant'} over the pool "
            f"({len(u)} questions, {distinct} distinct value(s), spread max - min = {spread:.3g} <= route.min_spread="
            f"{min_spread:g}): routing on it would be the tie-breaker's order")


def register(cls: type[Router]) -> type[Router]:
    """Add (or replace) a router class under its ``name``; usable as a decorator."""
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a router needs a name")
    _classes[cls.name] = cls
    _paths[cls.name] = f"{cls.__module__}:{cls.__qualname__}"
    return cls


def router_names() -> tuple[str, ...]:
    return tuple(_paths)


def get_router(name: str) -> Router:
    if name not in _classes:
        if name not in _paths:
            raise ValueError(f"unknown selector {name!r}; the selectors: {', '.join(_paths)}")
        module, cls = _paths[name].split(":")
        _classes[name] = getattr(importlib.import_module(module), cls)
    return _classes[name]()
