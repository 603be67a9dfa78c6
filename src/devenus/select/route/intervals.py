"""Difficulty intervals on the pass rate p (labeled pools): keep ``low <= p <= high`` (each bound
inclusive or not: ``dapo`` is 0 < p < 1, ``balanced`` [0.25, 0.75], ``polaris`` drops p = 1), then,
over a training budget, the ``budget`` most uncertain of the kept questions. Kept rows keep their
labels (decision ``keep``); the rest are discarded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.config import option
from devenus.select.route.router import RouteConfig, Router, RouteInputs

#: name -> (low, high, low inclusive, high inclusive)
INTERVALS = {"dapo": (0.0, 1.0, False, False), "balanced": (0.25, 0.75, True, True), "polaris": (0.0, 1.0, True, False)}


@dataclass
class IntervalConfig(RouteConfig):
    """``route.selector: interval``: the pass-rate interval, then the ``budget`` most uncertain inside it."""

    interval: str = option("dapo", "a preset pass-rate interval, or custom (route.low, route.high)",
                           choices=(*INTERVALS, "custom"))
    low: float | None = option(None, "custom: lowest pass rate kept", ge=0.0, le=1.0)
    high: float | None = option(None, "custom: highest pass rate kept", ge=0.0, le=1.0)
    budget: int | None = option(None, "keep the budget most uncertain inside (null: all)", ge=1)

    def check(self) -> None:
        if self.interval == "custom":
            if self.low is None or self.high is None:
                raise self.error("route.interval=custom needs route.low and route.high")
            if self.low > self.high:
                raise self.error(f"route.low={self.low} must be <= route.high={self.high}")

    def bounds(self) -> tuple[float, float, bool, bool]:
        """(low, high, low inclusive, high inclusive) of the pass-rate interval."""
        if self.interval == "custom":
            return float(self.low), float(self.high), True, True  # type: ignore[arg-type]
        return INTERVALS[self.interval]


def interval_mask(p: np.ndarray, low: float, high: float, low_inclusive: bool = True,
                  high_inclusive: bool = True) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    lo = p >= low if low_inclusive else p > low
    hi = p <= high if high_inclusive else p < high
    return lo & hi & np.isfinite(p)


def interval_route(p: np.ndarray, u: np.ndarray, ties: np.ndarray, bounds: tuple[float, float, bool, bool],
                   budget: int | None = None) -> np.ndarray:
    """Decisions (``KEEP`` / ``DISCARD`` codes) per question."""
    from devenus.select.route.order import DISCARD, KEEP, uncertainty_order

    inside = interval_mask(p, *bounds)
    out = np.full(len(p), DISCARD, dtype=np.int8)
    if budget is None or budget >= int(inside.sum()):
        out[inside] = KEEP
        return out
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    order = uncertainty_order(np.where(inside, u, -np.inf), ties)
    out[order[:budget]] = KEEP
    return out


class IntervalRouter(Router):
    """Labeled pools: keep the questions whose pass rate lies in the interval, the ``budget`` most uncertain."""

    name = "interval"
    config_class = IntervalConfig
    needs_signals = ("accuracy",)  # the pass rate: a labeled pool

    def ranks_by_signal(self, config) -> bool:
        return config.budget is not None  # without a budget every question inside the interval is kept

    def route(self, inputs: RouteInputs, info: dict) -> tuple[np.ndarray, np.ndarray]:
        from devenus.select.route.order import check_scores

        r = inputs.config
        u = self.labeled_rows_sign(inputs, info)
        p = np.asarray(inputs.columns["pass_rate"], dtype=np.float64)
        check_scores(p, inputs.keys, "accuracy")
        bounds = r.bounds()
        if r.budget is not None:
            check_scores(u, inputs.keys, r.signal)
        info.update(interval=r.interval, bounds=list(bounds), budget=r.budget)
        return interval_route(p, np.nan_to_num(u, nan=-np.inf), inputs.ties, bounds, r.budget), u
