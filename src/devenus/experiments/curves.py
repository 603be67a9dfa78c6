"""Held-out accuracy against rollouts generated, from the runner's per-run records.

A record's ``curves`` hold verl's per-step metrics (the file tracker), its ``val_curve`` one accuracy per
validation point (``trainer.test_freq``). Here they become points (cumulative rollouts, accuracy), and
the questions an experiment on rollout savings asks of them:

- :func:`rollouts_to_reach`: the rollouts a run needed to first reach a target accuracy, linearly
  interpolated between validation points (None when it never did);
- :func:`accuracy_at`: the accuracy a run had after a given number of rollouts (interpolated; None past
  its last point);
- :func:`savings`: for each seed, an arm against its reference arm of the same seed: the rollouts it
  needed to reach the reference's final accuracy, as a share of the reference's rollouts; and its
  accuracy at ``goal`` times the reference's rollouts minus the reference's final accuracy. Intervals
  over seeds come from :mod:`devenus.experiments.stats`;
- :func:`zero_variance_floor`: the share of generated groups whose rewards had zero variance, per seed
  (runs with the sampling seam on log it); an arm that generated only the informative ones, for the
  same steps, would still spend (1 - that share) of the rollouts.

Rollouts are ``devenus/rollouts/generated`` (responses generated for the step: training, refill and
vote-only rows; probe rollouts are counted apart), summed over steps 1..s.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from devenus.experiments.provenance import weights_id
from devenus.experiments.stats import Interval, mean_interval

ROLLOUTS = "devenus/rollouts/generated"
ZERO_VARIANCE = "devenus/sampling/zero_variance_share"  # per step: zero-variance groups / groups generated

Points = list[tuple[float, float]]  # (cumulative rollouts, accuracy), rollouts non-decreasing


def cumulative_rollouts(curves: Sequence[Mapping], key: str = ROLLOUTS) -> dict[int, float]:
    """Step -> rollouts generated in steps 1..step. Every step 1..N must be there once and carry ``key``:
    a gap would undercount every later point."""
    by_step: dict[int, Mapping] = {}
    for c in curves:
        s = int(c["step"])
        if s in by_step:
            raise ValueError(f"step {s} appears twice in the run's metrics")
        by_step[s] = c
    steps = sorted(by_step)
    if steps != list(range(1, len(steps) + 1)):
        raise ValueError(f"the run's metrics must hold steps 1..N, each once; got {steps}")
    out, total = {}, 0.0
    for s in steps:
        v = by_step[s].get(key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise KeyError(f"step {s}: no {key!r} in the run's metrics (the trainer logs it on every step "
                           f"once the sampling seam is in)")
        total += float(v)
        out[s] = total
    return out


def accuracy_curve(record: Mapping, base: Mapping | None = None, group: str = "ID",
                   key: str = ROLLOUTS) -> Points:
    """(cumulative rollouts, accuracy) at each validation point of ``record``; ``base`` (the same seed's
    step-0 validation) gives the point at 0 rollouts."""
    cum = cumulative_rollouts(record["curves"], key)
    pts: Points = []
    if base is not None and group in base.get("accuracy", {}):
        pts.append((0.0, float(base["accuracy"][group])))
    for v in sorted(record.get("val_curve") or [], key=lambda v: v["step"]):
        if group not in v:
            continue
        s = int(v["step"])
        if s == 0:
            if not pts:
                pts.append((0.0, float(v[group])))
            continue
        if s not in cum:
            raise ValueError(f"validation at step {s} but the metrics end at step {max(cum, default=0)}")
        pts.append((cum[s], float(v[group])))
    return pts


def rollouts_to_reach(points: Points, target: float) -> float | None:
    """The rollouts at which the curve first reaches ``target`` (linear between points); None: never."""
    for i, (x, y) in enumerate(points):
        if y >= target:
            if i == 0:
                return x
            x0, y0 = points[i - 1]
            return x0 + (target - y0) / (y - y0) * (x - x0)  # y0 < target <= y, so y > y0
    return None


def accuracy_at(points: Points, rollouts: float) -> float | None:
    """The curve's accuracy after ``rollouts`` (linear between points); None outside the points' range."""
    if not points or rollouts < points[0][0] or rollouts > points[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= rollouts <= x1:
            return y0 if x1 == x0 else y0 + (rollouts - x0) / (x1 - x0) * (y1 - y0)
    return points[-1][1]  # a single point, at exactly its rollouts


def base_run(records: Mapping[tuple[str, int], Mapping], record: Mapping) -> Mapping | None:
    """The ``base`` run (step 0) of ``record``'s seed when it ran on the same base-model weights, else None:
    a curve never starts from another model's accuracy."""
    base = records.get(("base", record["seed"]))
    return base if base is not None and weights_id(base) == weights_id(record) else None


def arm_curves(records: Mapping[tuple[str, int], Mapping], arm: str) -> list[Points]:
    """The ID accuracy curve of each of ``arm``'s runs, in seed order, each from its seed's base run; a run whose
    curve cannot be read is left out (a report's notes name it)."""
    out = []
    for (name, _), r in sorted(records.items()):
        if name == arm:
            try:
                out.append(accuracy_curve(r, base_run(records, r)))
            except (KeyError, ValueError):
                pass
    return out


def paired_curves(records: Mapping[tuple[str, int], Mapping], arm: str, ref: str, group: str = "ID",
                  key: str = ROLLOUTS, notes: list[str] | None = None) -> dict[int, tuple[Points, Points]]:
    """Per seed where ``arm`` and ``ref`` both ran on the same base-model weights (the runner's pairing rule):
    their accuracy curves, both from that seed's base run. With ``notes``, a seed whose curve cannot be read
    is named there and left out; without, the error propagates."""
    out = {}
    for (name, seed), r in sorted(records.items()):
        if name != arm or (ref, seed) not in records or weights_id(r) != weights_id(records[(ref, seed)]):
            continue
        base = base_run(records, r)
        try:
            out[seed] = (accuracy_curve(r, base, group, key), accuracy_curve(records[(ref, seed)], base, group, key))
        except (KeyError, ValueError) as e:
            if notes is None:
                raise
            notes.append(f"- {arm} vs {ref}, seed {seed}: {e}")
    return out


def savings(records: Mapping[tuple[str, int], Mapping], arm: str, ref: str, goal: float = 0.6,
            group: str = "ID", key: str = ROLLOUTS) -> dict:
    """``arm`` against ``ref`` seed by seed (both runs of a seed, on the same base-model weights).

    Per seed: ``target`` (ref's final accuracy), ``ref_rollouts`` (ref's total), ``reach`` (the arm's
    rollouts to first reach ``target``), ``ratio`` = reach / ref_rollouts (None: not reached; then
    ``ratio_above`` = the arm's total / ref_rollouts bounds it from below), and ``delta_at_goal`` = the arm's
    accuracy at ``goal`` x ref_rollouts minus ``target``. Over seeds: ``ratio`` (mean interval, only when
    every seed reached), its verdict against ``goal`` (claimed: below), and ``delta_at_goal``."""
    per_seed: dict[int, dict] = {}
    for seed, (a, b) in paired_curves(records, arm, ref, group, key).items():
        if not a or not b:
            continue
        target, total = b[-1][1], b[-1][0]
        reach = rollouts_to_reach(a, target)
        at_goal = accuracy_at(a, goal * total)
        per_seed[seed] = {
            "target": target, "ref_rollouts": total, "arm_rollouts": a[-1][0], "reach": reach,
            "ratio": None if reach is None or total <= 0 else reach / total,
            "ratio_above": a[-1][0] / total if reach is None and total > 0 else None,
            "delta_at_goal": None if at_goal is None else at_goal - target,
            "final_delta": a[-1][1] - target,
        }
    out: dict = {"arm": arm, "ref": ref, "goal": goal, "group": group, "seeds": per_seed}
    ratios = [s["ratio"] for s in per_seed.values()]
    unreached = [seed for seed, s in per_seed.items() if s["ratio"] is None]
    if per_seed and not unreached:
        iv = mean_interval(ratios)
        out["ratio"] = iv.to_dict()
        out["verdict"] = Interval(iv.mean - goal, iv.half_width, iv.n, iv.level).verdict(-1)
    elif per_seed:
        out["verdict"] = f"not reached on seed(s) {unreached}"
    deltas = [s["delta_at_goal"] for s in per_seed.values() if s["delta_at_goal"] is not None]
    if deltas and len(deltas) == len(per_seed):
        out["delta_at_goal"] = mean_interval(deltas).to_dict()
    return out


def zero_variance_floor(records: Mapping[tuple[str, int], Mapping], arm: str, key: str = ZERO_VARIANCE) -> dict:
    """``arm``'s zero-variance share of generated groups: per seed, the mean over its training steps of
    ``key``; over seeds, its mean interval and ``floor`` = 1 - that mean (the rollouts, as a share, that a
    run generating only informative groups would still spend at the same steps). Seeds whose runs never
    logged ``key`` are left out; no seed at all: ``{"seeds": {}}``."""
    per_seed = {}
    for (name, seed), r in sorted(records.items()):
        if name != arm:
            continue
        shares = [float(m[key]) for m in r.get("curves") or [] if m.get("step", 0) > 0 and key in m]
        if shares:
            per_seed[seed] = {"share": sum(shares) / len(shares), "steps": len(shares)}
    out: dict = {"arm": arm, "seeds": per_seed}
    if per_seed:
        iv = mean_interval([v["share"] for v in per_seed.values()])
        out["share"] = iv.to_dict()
        out["floor"] = 1.0 - iv.mean
    return out
