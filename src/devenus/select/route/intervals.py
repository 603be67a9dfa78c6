"""Difficulty intervals on the pass rate p (labeled pools): keep ``low <= p <= high`` (each bound
inclusive or not: ``dapo`` is 0 < p < 1, ``balanced`` [0.25, 0.75], ``polaris`` drops p = 1), then,
over a training budget, the ``budget`` most uncertain of the kept questions. Kept rows keep their
labels (decision ``keep``); the rest are discarded."""

from __future__ import annotations

import numpy as np

from devenus.select.route.router import Router, RouteInputs


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
    needs_signals = ("accuracy",)  # the pass rate: a labeled pool

    def ranks_by_signal(self, config) -> bool:
        return config.budget is not None  # without a budget every question inside the interval is kept

    def route(self, inputs: RouteInputs, info: dict) -> tuple[np.ndarray, np.ndarray]:
        from devenus.select.config import interval_bounds
        from devenus.select.route.order import check_scores

        r = inputs.config
        u = self.labeled_rows_sign(inputs, info)
        p = np.asarray(inputs.columns["pass_rate"], dtype=np.float64)
        check_scores(p, inputs.keys, "accuracy")
        bounds = interval_bounds(r)
        if r.budget is not None:
            check_scores(u, inputs.keys, r.signal)
        info.update(interval=r.interval, bounds=list(bounds), budget=r.budget)
        return interval_route(p, np.nan_to_num(u, nan=-np.inf), inputs.ties, bounds, r.budget), u
