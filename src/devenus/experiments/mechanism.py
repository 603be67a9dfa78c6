"""A run's mechanism metrics, from its per-step metrics: one ratio per run, and per arm over seeds.

The trainer logs each ratio per step beside the counts it is made of (:mod:`devenus.online.mechanism`,
docs/trainer.md "Mechanism metrics"; the skip rule's audit, :mod:`devenus.online.skipping`). A run's
ratio is the sum of its steps' numerators over the sum of their denominators, not a mean of step ratios
(a step with 2 groups weighs as much as its 2 groups). Per kind:

- the count ratios of :data:`devenus.online.mechanism.RATIOS` (``pseudo_target``, ``admission``,
  ``correction``, ``proposed_correction``, ``promotion``) and ``skip/precision`` (audited skips whose
  group had zero variance / audited skips);
- ``reward_auroc/auroc``: a step's AUROC times its pairs (right rows x wrong rows) is its Mann-Whitney
  count, so the run's value is that count summed over steps / the pairs summed over steps: the AUROC
  over pairs of rows of one step (rows of different steps are never compared).

Each run metric keeps its numerator, denominator, the steps that logged it and the per-step series
``[[step, ratio], ...]``.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from devenus.online.mechanism import PREFIX, RATIOS

SKIP_PRECISION = ("devenus/skip/precision", "devenus/skip/audited_zero_variance", "devenus/skip/audited")
AUROC = f"{PREFIX}/reward_auroc/auroc"


def ratio_keys() -> list[tuple[str, str, str]]:
    """(ratio key, numerator key, denominator key) of every count ratio a run can log."""
    out = [(f"{PREFIX}/{kind}/{name}", f"{PREFIX}/{kind}/{num}", f"{PREFIX}/{kind}/{den}")
           for kind, ratios in sorted(RATIOS.items()) for name, (num, den) in ratios.items()]
    return out + [SKIP_PRECISION]


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _pairs(step: Mapping) -> float:
    right, rows = step.get(f"{PREFIX}/reward_auroc/correct"), step.get(f"{PREFIX}/reward_auroc/rows")
    return float(right) * (float(rows) - float(right)) if _finite(right) and _finite(rows) else 0.0


def run_mechanism(curves: Sequence[Mapping]) -> dict[str, dict]:
    """Ratio key -> {value, num, den, steps, series} over a run's per-step metrics (``{"step": N, ...}``
    rows, e.g. a result's ``curves``); a ratio no step logged with a non-zero denominator is left out."""
    steps = sorted((c for c in curves if int(c.get("step", 0)) > 0), key=lambda c: int(c["step"]))
    out: dict[str, dict] = {}
    terms = [(key, lambda c, n=num: c.get(n), lambda c, d=den: c.get(d)) for key, num, den in ratio_keys()]
    terms.append((AUROC, lambda c: c[AUROC] * _pairs(c) if _finite(c.get(AUROC)) else None,
                  lambda c: _pairs(c) if _finite(c.get(AUROC)) else None))
    for key, num_of, den_of in terms:
        num = den = 0.0
        series = []
        for c in steps:
            n, d = num_of(c), den_of(c)
            if not (_finite(n) and _finite(d)) or d <= 0:
                continue
            num, den = num + float(n), den + float(d)
            series.append([int(c["step"]), float(n) / float(d)])
        if den > 0:
            out[key] = {"value": num / den, "num": num, "den": den, "steps": len(series), "series": series}
    return out


def arm_mechanism(runs: Mapping[int, Mapping[str, dict]]) -> dict[str, dict]:
    """Seed -> :func:`run_mechanism` of that seed's run, to: ratio key -> the runs' values' mean with its
    95% Student-t half-width over seeds (:func:`devenus.experiments.stats.mean_interval`), the seeds, and
    the pooled ratio (numerators summed over every run / denominators summed)."""
    from devenus.experiments.stats import mean_interval

    keys = sorted({k for m in runs.values() for k in m})
    out = {}
    for key in keys:
        have = {s: m[key] for s, m in runs.items() if key in m}
        num, den = sum(v["num"] for v in have.values()), sum(v["den"] for v in have.values())
        out[key] = {**mean_interval([v["value"] for v in have.values()]).to_dict(), "seeds": sorted(have),
                    "num": num, "den": den, "pooled": num / den}
    return out


def pooled_mechanism(runs: Mapping[int, Mapping[str, dict]]) -> dict[str, dict]:
    """Seed -> :func:`run_mechanism` of that seed's run, to one mechanism of every run's counts summed, read as
    a single run's would be (ratio key -> {value, num, den})."""
    return {key: {"num": v["num"], "den": v["den"], "value": v["pooled"]} for key, v in arm_mechanism(runs).items()}
