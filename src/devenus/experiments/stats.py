"""Paired comparisons for experiments: Student-t intervals of a mean and of paired differences.

Two kinds of pairing are used, and they answer different questions:

- **over seeds** (:func:`paired_over_seeds`): arm minus its baseline run by run, one difference per
  seed (same data order and rollout seeds in both). The interval covers training noise as well as
  evaluation noise: it is the one that decides a claim (shared/specs/experiments.md).
- **over questions** (:func:`paired_over_questions`): one run's per-question accuracy minus its
  baseline's on the same validation questions. It covers evaluation noise only (which questions, which
  samples), so it says whether one seed's difference is resolvable by the validation, not whether it
  would recur with another seed.

The t quantile is scipy's (``scipy.stats.t.ppf``; scipy is a required dependency).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Interval:
    mean: float
    half_width: float  # NaN with fewer than 2 values
    n: int
    level: float = 0.95

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def verdict(self, side: int = 1) -> str:
        """Against 0, for a claim that the effect has sign ``side``: the specs' three outcomes."""
        if math.isnan(self.half_width):
            return "one run: no interval"
        if side * self.low > 0 if side > 0 else side * self.high > 0:
            return "excludes 0 (claimed side)"
        if (self.high < 0) if side > 0 else (self.low > 0):
            return "excludes 0 (other side)"
        return "inconclusive"

    def fmt(self, signed: bool = True) -> str:
        m = f"{self.mean:+.3f}" if signed else f"{self.mean:.3f}"
        return m if math.isnan(self.half_width) else f"{m} ± {self.half_width:.3f}"

    def to_dict(self) -> dict:
        return asdict(self)


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    if not 0 < q < 1 or df <= 0:
        raise ValueError(f"t_ppf needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    from scipy.stats import t  # here, not at import: scipy.stats takes a while to load

    return float(t.ppf(q, df))


def mean_interval(xs: Sequence[float], level: float = 0.95) -> Interval:
    """Mean and the half-width of its two-sided Student-t interval (NaN half-width with one value)."""
    xs = [float(x) for x in xs]
    if not xs:
        raise ValueError("mean_interval of no values")
    n = len(xs)
    mean = math.fsum(xs) / n
    if n < 2:
        return Interval(mean, float("nan"), n, level)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    return Interval(mean, t_ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n), n, level)


def paired_differences(arm: Mapping, base: Mapping) -> list[float]:
    """``arm[k] - base[k]`` for every key both have, in key order."""
    common = sorted(set(arm) & set(base), key=str)
    return [float(arm[k]) - float(base[k]) for k in common]


def paired_over_seeds(arm: Mapping[int, float], base: Mapping[int, float], level: float = 0.95) -> Interval:
    """Arm minus baseline, paired by seed: the interval that decides a claim."""
    d = paired_differences(arm, base)
    if not d:
        raise ValueError("no seed has both the arm and its baseline")
    return mean_interval(d, level)


def paired_over_questions(arm: Mapping[str, float], base: Mapping[str, float], level: float = 0.95) -> Interval:
    """One run minus its baseline's run, paired by validation question (evaluation noise only)."""
    d = paired_differences(arm, base)
    if not d:
        raise ValueError("no question was scored in both runs")
    return mean_interval(d, level)
