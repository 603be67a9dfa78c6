"""Probe-calibrated triage for an unlabeled pool (methods.md, "Probe-calibrated triage").

1. Sort the pool by u; draw ``m`` probes by systematic stratified sampling across the ranking
   (default 3% of the pool, at least 50; one seeded offset, then every n/m-th question).
2. Annotate the probes; from the G samples already drawn compute each probe's pass rate against its
   annotation and whether its majority answer was right (done by the route stage).
3. Slide a window of ``w = max(5, m // 10)`` probes over the probes sorted by u (optionally
   isotonic-smoothed first: pass rate non-increasing, majority correctness non-increasing in u). Each
   window is placed at the median u of its probes.
   ``t_discard`` = the largest window u whose pass rate >= 0.875 (none: nothing discarded);
   ``t_annotate`` = the smallest window u whose majority correctness < 0.5 (none: nothing annotated).
4. Route: ``u <= t_discard`` -> discard; ``u >= t_annotate`` -> annotate, highest u first, capped by
   the annotation budget (probes count against it), overflow -> weak; between -> weak. Probes are
   annotated whatever their u (they keep their labels). Where the two thresholds cross
   (``t_discard >= t_annotate``), annotation wins: a question is discarded only below ``t_annotate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.config import option
from devenus.select.route.router import RouteConfig, Router, RouteInputs, calibrate_sign


@dataclass
class TriageConfig(RouteConfig):
    """``route.selector: triage``: probes drawn across the ranking, annotated, windowed -> thresholds."""

    probe_fraction: float = option(0.03, "share of questions probed", ge=0.0, le=1.0)
    min_probes: int = option(50, "at least this many probes", ge=1)
    window: int | None = option(None, "probes per window (null: max(5, probes // 10))", ge=1)
    isotonic: bool = option(False, "isotonic fit of the window curves")
    discard_pass_rate: float = option(0.875, "t_discard: largest window u with pass rate >= this", ge=0.0, le=1.0)
    annotate_majority_below: float = option(0.5, "t_annotate: smallest window u with majority correctness < this",
                                            ge=0.0, le=1.0)
    annotation_budget: int | None = option(None, "cap on annotated questions, probes included (overflow -> weak)",
                                           ge=0)


def draw_probes(u: np.ndarray, ties: np.ndarray, fraction: float = 0.03, minimum: int = 50, seed: int = 0) -> np.ndarray:
    """Indices of the probes, from the least to the most uncertain."""
    from devenus.select.route.order import uncertainty_order

    n = len(u)
    m = min(n, max(minimum, int(round(fraction * n))))
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    ascending = uncertainty_order(u, ties)[::-1]
    stride = n / m
    offset = np.random.default_rng(seed).random() * stride
    pos = np.minimum(np.floor(offset + stride * np.arange(m)).astype(np.int64), n - 1)
    return ascending[pos]


def isotonic_decreasing(y: np.ndarray) -> np.ndarray:
    """Least-squares non-increasing fit (pool adjacent violators)."""
    vals: list[float] = []
    sizes: list[int] = []
    for v in np.asarray(y, dtype=np.float64):
        vals.append(float(v))
        sizes.append(1)
        while len(vals) > 1 and vals[-2] < vals[-1]:
            s = sizes[-2] + sizes[-1]
            vals[-2] = (vals[-2] * sizes[-2] + vals[-1] * sizes[-1]) / s
            sizes[-2] = s
            vals.pop()
            sizes.pop()
    return np.repeat(vals, sizes)


def calibrate(u_probe: np.ndarray, pass_rate: np.ndarray, majority_correct: np.ndarray, *, window: int | None = None,
              isotonic: bool = False, discard_pass_rate: float = 0.875, annotate_below: float = 0.5) -> dict:
    """Thresholds and the calibration curve from the annotated probes (any order)."""
    order = np.argsort(np.asarray(u_probe, dtype=np.float64), kind="stable")
    u = np.asarray(u_probe, dtype=np.float64)[order]
    pr = np.asarray(pass_rate, dtype=np.float64)[order]
    mc = np.asarray(majority_correct, dtype=np.float64)[order]
    m = len(u)
    if m == 0:
        raise ValueError("probe-calibrated triage needs at least one probe")
    if isotonic:
        pr, mc = isotonic_decreasing(pr), isotonic_decreasing(mc)
    w = min(m, window or max(5, m // 10))
    kernel = np.ones(w) / w
    win_pass = np.convolve(pr, kernel, mode="valid")
    win_major = np.convolve(mc, kernel, mode="valid")
    win_u = np.array([np.median(u[i:i + w]) for i in range(m - w + 1)])
    ok_discard = win_pass >= discard_pass_rate
    bad_majority = win_major < annotate_below
    t_discard = float(win_u[ok_discard].max()) if ok_discard.any() else -np.inf
    t_annotate = float(win_u[bad_majority].min()) if bad_majority.any() else np.inf
    return {"t_discard": t_discard, "t_annotate": t_annotate, "window": int(w), "isotonic": bool(isotonic),
            "curve": {"u": win_u.tolist(), "pass_rate": win_pass.tolist(), "majority_correct": win_major.tolist()}}


def triage_route(u: np.ndarray, ties: np.ndarray, probes: np.ndarray, t_discard: float, t_annotate: float,
                 annotation_budget: int | None = None) -> np.ndarray:
    """Decisions (codes) per question; see the module doc."""
    from devenus.select.route.order import ANNOTATE, DISCARD, WEAK, uncertainty_order

    u = np.asarray(u, dtype=np.float64)
    out = np.full(len(u), WEAK, dtype=np.int8)
    out[(u <= t_discard) & (u < t_annotate)] = DISCARD
    is_probe = np.zeros(len(u), dtype=bool)
    is_probe[probes] = True
    want = np.flatnonzero((u >= t_annotate) & ~is_probe)
    left = len(want) if annotation_budget is None else max(0, annotation_budget - int(is_probe.sum()))
    if len(want) > left:
        order = uncertainty_order(u, ties)
        rank = np.empty(len(u), dtype=np.int64)
        rank[order] = np.arange(len(u))
        want = want[np.argsort(rank[want], kind="stable")][:left]
    out[want] = ANNOTATE
    out[is_probe] = ANNOTATE
    return out


class TriageRouter(Router):
    """Unlabeled pools: thresholds calibrated on annotated probes drawn across the ranking."""

    name = "triage"
    config_class = TriageConfig
    annotates_while_routing = True

    def check(self, config) -> str | None:
        from devenus.select.config import RANDOM

        if config.route.signal == RANDOM:
            return "route.signal=random has no scores to calibrate: use it with the ratio or interval selector"
        return super().check(config)

    def route(self, inputs: RouteInputs, info: dict) -> tuple[np.ndarray, np.ndarray]:
        from devenus.select.route.order import check_scores

        r, u, ties = inputs.config, inputs.u, inputs.ties
        check_scores(u, inputs.keys, r.signal)
        if inputs.probe_oracle is None:
            raise ValueError("route.selector=triage needs an annotation source for its probes")
        probes = draw_probes(u, ties, r.probe_fraction, r.min_probes, r.seed)
        pass_rate, majority_correct, labels = inputs.probe_oracle(probes)
        pass_rate = np.asarray(pass_rate, dtype=np.float64)
        majority_correct = np.asarray(majority_correct, dtype=np.float64)
        if r.calibrate_sign:
            u = calibrate_sign(u, probes, majority_correct == 0.0, "probes", info)
        cal = calibrate(u[probes], pass_rate, majority_correct, window=r.window, isotonic=r.isotonic,
                        discard_pass_rate=r.discard_pass_rate, annotate_below=r.annotate_majority_below)
        dec = triage_route(u, ties, probes, cal["t_discard"], cal["t_annotate"], r.annotation_budget)
        info.update(thresholds={"t_discard": cal["t_discard"], "t_annotate": cal["t_annotate"]},
                    window=cal["window"], isotonic=cal["isotonic"], calibration_curve=cal["curve"],
                    probe_keys=[inputs.keys[i] for i in probes], annotation_budget=r.annotation_budget,
                    probe_pass_rate=pass_rate.tolist(), probe_majority_correct=majority_correct.tolist(),
                    probes=probes, labels=labels)
        return dec, u
