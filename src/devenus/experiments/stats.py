"""Paired comparisons for experiments: Student-t intervals of a mean and of paired differences.

Two kinds of pairing are used, and they answer different questions:

- **over seeds** (:func:`paired_over_seeds`): arm minus its baseline run by run, one difference per
  seed (same data order and rollout seeds in both). The interval covers training noise as well as
  evaluation noise: it is the one that decides a claim (shared/specs/experiments.md).
- **over questions** (:func:`paired_over_questions`): one run's per-question accuracy minus its
  baseline's on the same validation questions. It covers evaluation noise only (which questions, which
  samples), so it says whether one seed's difference is resolvable by the validation, not whether it
  would recur with another seed.

The t and normal distributions are scipy's (a required dependency); means and SDs are summed here with
``math.fsum`` (exactly rounded), not through scipy's tests, whose numpy sums differ in the last digit that the
reports' .json files keep (tests/experiments/test_stats.py).
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
        """Against 0, for a claim that the effect has sign ``side``: the specs' three outcomes. ``side`` 0 (a
        claim of no difference): whether the interval excludes 0 at all; equivalence itself is TOST's
        (:func:`decide`)."""
        if math.isnan(self.half_width):
            return "one run: no interval"
        if side == 0:
            return "excludes 0 (claimed: none)" if self.low > 0 or self.high < 0 else "includes 0"
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


# ---- proportions pooled over a run (mechanism metrics): counts k of n

def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


def wilson_interval(k: float, n: float, design_effect: float = 1.0, level: float = 0.95) -> tuple[float, float]:
    """Wilson interval of k / n at the effective n = n / ``design_effect`` (the same proportion): with
    clustered counts (a question counted on each of its visits) the design effect widens it. Written out
    because scipy's ``binomtest`` takes whole counts only; equal to it where n is whole (tested)."""
    z, p, ne = _z(level), k / n, n / design_effect
    centre = (p + z * z / (2 * ne)) / (1 + z * z / ne)
    half = z * math.sqrt(p * (1 - p) / ne + z * z / (4 * ne * ne)) / (1 + z * z / ne)
    return centre - half, centre + half


def proportion_difference(k1: float, n1: float, k2: float, n2: float, design_effect: float = 1.0,
                          level: float = 0.95) -> tuple[float, float, float]:
    """k1/n1 - k2/n2 and its Wald interval (independent groups; each variance times ``design_effect``):
    (difference, low, high)."""
    p, q = k1 / n1, k2 / n2
    half = _z(level) * math.sqrt(design_effect * (p * (1 - p) / n1 + q * (1 - q) / n2))
    return p - q, p - q - half, p - q + half


# ---- decisions: difference, equivalence (TOST), Holm across the claims of one experiment, power

@dataclass(frozen=True)
class Decision:
    """One claim's paired differences tested both ways: a two-sided paired t test against 0 (``p_diff``)
    and two one-sided tests against ``±margin`` (``p_equiv``, TOST: small when the difference lies
    inside the margin). ``side`` is the claimed sign (+1, -1), or 0 for a claim of equivalence."""

    name: str
    mean: float
    sd: float  # NaN with fewer than 2 differences
    n: int
    side: int
    margin: float
    p_diff: float
    p_equiv: float

    def verdict(self, alpha: float = 0.05, p_diff: float | None = None, p_equiv: float | None = None) -> str:
        """Reproduced / wrong side / null within margin / inconclusive, at ``alpha`` (pass Holm-adjusted
        p-values to decide a family). A difference from 0 is read first; only without one can a precise
        null be called a null. For an equivalence claim (side 0) the null is the claim."""
        pd_ = self.p_diff if p_diff is None else p_diff
        pe = self.p_equiv if p_equiv is None else p_equiv
        if self.side == 0:
            if pe < alpha:
                return "reproduced"
            return "wrong side" if pd_ < alpha and abs(self.mean) > self.margin else "inconclusive"
        if pd_ < alpha:
            return "reproduced" if self.side * self.mean > 0 else "wrong side"
        return "null within margin" if pe < alpha else "inconclusive"


def _t_sf(t: float, df: float) -> float:
    from scipy.stats import t as student

    return float(student.sf(t, df))


def decide(name: str, diffs: Sequence[float], side: int, margin: float) -> Decision:
    """Test one claim's per-seed paired differences (arm minus baseline) against 0 and against ``±margin``."""
    if side not in (-1, 0, 1):
        raise ValueError(f"{name}: side must be -1, 0 or +1, got {side}")
    if not margin > 0:
        raise ValueError(f"{name}: the equivalence margin must be > 0, got {margin}")
    d = [float(x) for x in diffs]
    if not d:
        raise ValueError(f"{name}: no paired differences")
    n = len(d)
    mean = math.fsum(d) / n
    if n < 2:
        return Decision(name, mean, float("nan"), n, side, margin, float("nan"), float("nan"))
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    if sd == 0:  # every seed gave the same difference: no noise to test against
        p_diff = 1.0 if mean == 0 else 0.0
        p_equiv = 0.0 if abs(mean) < margin else 1.0
    else:
        se = sd / math.sqrt(n)
        p_diff = min(1.0, 2 * _t_sf(abs(mean) / se, n - 1))
        p_equiv = max(_t_sf((mean + margin) / se, n - 1), _t_sf((margin - mean) / se, n - 1))
    return Decision(name, mean, sd, n, side, margin, p_diff, p_equiv)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given; NaN stays NaN and is not counted)."""
    idx = sorted((i for i, p in enumerate(pvalues) if not math.isnan(p)), key=lambda i: pvalues[i])
    m = len(idx)
    out = [float("nan")] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def verdicts(decisions: Sequence[Decision], alpha: float = 0.05) -> dict[str, str]:
    """Each claim's verdict with Holm's correction across the claims of one experiment, applied to the
    difference tests and to the equivalence tests separately (each family is one set of hypotheses)."""
    pd_ = holm([d.p_diff for d in decisions])
    pe = holm([d.p_equiv for d in decisions])
    out = {}
    for d, a, b in zip(decisions, pd_, pe):
        out[d.name] = "inconclusive" if d.n < 2 else d.verdict(alpha, a, b)
    return out


@dataclass(frozen=True)
class Claim:
    """One claim decided on results: ``arm`` vs ``ref`` over the ``seeds`` both ran on the same base weights;
    ``decision`` and ``verdict`` are None when it has fewer seeds than the family asks for."""

    arm: str
    ref: str
    side: int
    seeds: list
    diffs: list
    decision: Decision | None
    verdict: str | None


def decide_claims(records: Mapping, claims: Sequence[tuple[str, str, int]], margin: float,
                  min_seeds: int = 2) -> list[Claim]:
    """Each claim ``(arm, reference, claimed side)`` on ``records`` (``(arm, seed) -> result`` with
    ``accuracy["ID"]`` and ``base_model``): ID differences over the seeds both ran on the same weights, decided
    with :func:`decide`, Holm (:func:`verdicts`) across the claims with at least ``min_seeds`` (and 1) seeds."""
    from devenus.experiments.provenance import weights_id  # the runner's pairing rule

    rows, decisions = [], []
    for arm, ref, side in claims:
        seeds = [sd for (n, sd) in sorted(records) if n == arm and (ref, sd) in records
                 and weights_id(records[(arm, sd)]) == weights_id(records[(ref, sd)])]
        d = [records[(arm, sd)]["accuracy"]["ID"] - records[(ref, sd)]["accuracy"]["ID"] for sd in seeds]
        dec = decide(f"{arm} vs {ref}", d, side, margin) if d and len(d) >= min_seeds else None
        decisions += [dec] if dec else []
        rows.append((arm, ref, side, seeds, d, dec))
    v = verdicts(decisions)
    return [Claim(arm, ref, side, seeds, d, dec, v[dec.name] if dec else None)
            for arm, ref, side, seeds, d, dec in rows]


def power_difference(n: int, sd: float, delta: float, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t test with ``n`` pairs to detect a true mean difference ``delta``."""
    from scipy.stats import nct

    if n < 2:
        return 0.0
    df, ncp = n - 1, delta * math.sqrt(n) / sd
    crit = t_ppf(1 - alpha / 2, df)
    pw = float(nct.sf(crit, df, ncp) + nct.cdf(-crit, df, ncp))
    # scipy's noncentral t gives NaN far in its tail, where the power is 1 (or the two tails' 0)
    return pw if not math.isnan(pw) else float(abs(ncp) > crit)


def power_equivalence(n: int, sd: float, margin: float, alpha: float = 0.05) -> float:
    """Power of TOST with ``n`` pairs to call a true difference of 0 equivalent within ``±margin``."""
    from scipy.stats import nct

    if n < 2:
        return 0.0
    df, ncp = n - 1, margin * math.sqrt(n) / sd
    crit = t_ppf(1 - alpha, df)
    low = float(nct.cdf(crit, df, ncp))
    if math.isnan(low):  # far in scipy's tail: see power_difference
        low = float(ncp < crit)
    return max(0.0, 1 - 2 * low)


def seeds_needed(sd: float, effect: float, test: str = "difference", alpha: float = 0.05, power: float = 0.8,
                 limit: int = 10_000) -> int:
    """The fewest seeds (pairs) for ``power`` at ``alpha``: ``test`` 'difference' (two-sided paired t, true
    difference ``effect``) or 'equivalence' (TOST with margin ``effect``, true difference 0)."""
    fn = {"difference": power_difference, "equivalence": power_equivalence}[test]
    if sd == 0:
        return 2
    for n in range(2, limit + 1):
        if fn(n, sd, effect, alpha) >= power:
            return n
    raise ValueError(f"more than {limit} seeds needed (sd {sd}, effect {effect}, {test})")
