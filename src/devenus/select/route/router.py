"""Selectors as registered units: a :class:`Router` turns per-question scores into decisions.

A router names itself, declares its own config (:attr:`Router.config_class`, a :class:`RouteConfig`
subclass: the keys it reads, their defaults and bounds), the score signals it needs, whether it annotates
while routing (triage's probes: the annotation source is then part of the route stage's identity), and
implements ``route(inputs, info) -> (decisions, u)``. The ``route:`` section of a selection config is
built as the configured selector's own config, so a key that router does not read is refused at load.
The pipeline's route stage looks the configured selector up here and never branches on its name.
Built-in routers live beside their rule (``intervals.py``, ``ratios.py``, ``triage.py``) and are named
here by import path (:data:`BUILTIN`, on the one registry helper :mod:`devenus.registry`);
:func:`register` adds one at run time. Adding a router: docs/adding_a_router.md.

The sign of an uncertainty is calibrated one way for every router (:func:`calibrate_sign`): on the
rows whose correctness is known (labeled rows, or triage's annotated probes), flip u when its AUROC for
"the majority answer is wrong" is below 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from devenus.config import Config, ConfigError, option
from devenus.registry import Registry

#: selector name -> "module:Class"; imported on first :func:`get_router`
BUILTIN: dict[str, str] = {
    "interval": "devenus.select.route.intervals:IntervalRouter",
    "ratio": "devenus.select.route.ratios:RatioRouter",
    "triage": "devenus.select.route.triage:TriageRouter",
}
#: the router a ``route:`` section without ``selector`` runs
DEFAULT_SELECTOR = "ratio"


@dataclass
class RouteConfig(Config):
    """The keys every router reads; a router's own config derives from it and adds its keys."""

    key_path: ClassVar[str] = "route"

    # a registered router's name (not fixed choices: a plugin may register one; the section's variant)
    selector: str = option(DEFAULT_SELECTOR, "the router: interval, ratio, triage, or one registered in "
                                             "devenus.select.route.router")
    signal: str = option("consistency", "the uncertainty that ranks questions (one of score.signals), or random: "
                                        "a seeded random order")
    calibrate_sign: bool = option(False, "flip u when labeled rows (or triage probes) say it ranks the wrong way "
                                         "(AUROC < 0.5)")
    seed: int = option(0, "breaks ties between equal scores (and draws the random order)", ge=0)
    # the ranking checks: a signal that does not vary over the pool ranks nothing, the order would be the
    # tie-breaker's (applied when Router.ranks_by_signal says the decisions depend on the order)
    min_spread: float = option(1e-6, "the routing signal must vary over the pool by more than this (max - min) "
                                     "and take >= 2 distinct values, or it carries no information", ge=0.0)
    on_constant_signal: str = option("refuse", "a signal below min_spread: refuse before routing, or warn in one "
                                               "line and route on the tie-breaker", choices=("refuse", "warn"))

    @classmethod
    def override(cls, key: str, value: str = "<value>") -> str:
        return f"--set {cls.key(key)}={value}"

    @classmethod
    def variant(cls, values: Mapping[str, Any]) -> type["RouteConfig"]:
        """The config class of the selector ``values`` names (the default selector's when it names none)."""
        name = values.get("selector", DEFAULT_SELECTOR)
        if not isinstance(name, str):
            return cls  # building it names the key and the type expected
        if name not in ROUTERS:
            raise ConfigError(f"route.selector: {ROUTERS.unknown(name)} (set it with {cls.override('selector')})")
        return ROUTERS.get(name).config_class

    @classmethod
    def owner(cls, values: Mapping[str, Any]) -> str:
        return f"the {values.get('selector', DEFAULT_SELECTOR)!r} router"


@dataclass
class RouteInputs:
    """What a router sees: per-question columns (``u_<signal>``, ``pass_rate``, ``majority_correct``), the
    question keys, the ranking uncertainty ``u``, the seeded tie-breakers, the route config and (for routers
    that annotate while routing) ``probe_oracle(indices) -> (pass_rate, majority_correct, labels)``."""

    columns: dict[str, np.ndarray]
    keys: list[str]
    u: np.ndarray
    ties: np.ndarray
    config: Any  # the router's own RouteConfig
    probe_oracle: Callable | None = None


class Router:
    name: ClassVar[str] = ""
    #: the keys it reads: a RouteConfig subclass (the base when it reads no key of its own)
    config_class: ClassVar[type[RouteConfig]] = RouteConfig
    #: score signals the router reads besides route.signal
    needs_signals: ClassVar[tuple[str, ...]] = ()
    #: annotates questions while routing (its probes); the annotation source joins the stage identity
    annotates_while_routing: ClassVar[bool] = False

    def check(self, config) -> str | None:
        """Why a :class:`~devenus.select.config.SelectConfig` cannot run this router (None: it can); at load,
        after the router's own config checked its keys (``RouteConfig.check``). The base checks
        ``needs_signals``; a router with further rules across sections extends it."""
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


def _valid(name: str, cls: type[Router]) -> str | None:
    if cls.name != name:
        return f"names itself {cls.name!r}"
    c = cls.config_class
    if not (isinstance(c, type) and issubclass(c, RouteConfig)):
        return "its config_class must be a RouteConfig subclass"
    return None


ROUTERS: Registry[type[Router]] = Registry("router", error=ValueError, check=_valid, lazy=BUILTIN)


def register(cls: type[Router]) -> type[Router]:
    """Add a router class under its ``name``; usable as a decorator. A taken name is an error."""
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a router needs a name")
    return ROUTERS.register(cls.name, cls)


def router_names() -> tuple[str, ...]:
    return tuple(ROUTERS.names())


def get_router(name: str) -> Router:
    return ROUTERS.get(name)()
