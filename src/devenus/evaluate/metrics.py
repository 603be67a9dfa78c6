"""The field's sampled-accuracy metrics, per question and per benchmark, with bootstrap intervals.

Everything here is pure (no model, no files): a question's evidence is its n sampled answers
(``preds``, None for no answer) and their 0/1 grades (``scores``).

- avg@k: the mean grade over the k samples of a question (sampled pass@1), averaged over questions.
- pass@k: the unbiased estimator of Chen et al. (2021) from n >= k samples with c correct,
  ``1 - C(n-c, k) / C(n, k)``; with k = 1 it equals avg@n.
- maj@k: the majority answer of the k samples (equivalence-aware, :func:`devenus.verify.majority_vote`)
  is graded. The project's voting rules apply: abstentions (no extracted answer, e.g. a truncated
  response) are counted in the group but never vote, so they can never win; a tie between the largest
  clusters, or a group where nobody answered, has no majority and counts as wrong. The majority answer's
  grade is the grade of a sample whose extracted answer is the vote's target (no second verifier call).
- 95% intervals: percentile bootstrap over questions (resample questions with replacement, seeded), the
  unit being the question because samples of one question are correlated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "pass_at_k",
    "avg_score",
    "majority_correct",
    "bootstrap_interval",
    "bootstrap_macro_interval",
    "Interval",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct: ``1 - C(n-c, k) / C(n, k)``."""
    if not (0 <= c <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    if not (1 <= k <= n):
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples, got n={n}")
    if n - c < k:
        return 1.0  # every k-subset holds a correct sample
    # the product form avoids huge binomials: C(n-c, k)/C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def avg_score(scores: Sequence[float]) -> float:
    """avg@k of one question: the mean grade of its samples."""
    if len(scores) == 0:
        raise ValueError("avg@k of a question with no samples")
    return float(sum(scores)) / len(scores)


def majority_correct(preds: Sequence[str | None], scores: Sequence[float], verifier=None) -> float:
    """maj@k of one question: 1.0 if the unique majority answer is correct, else 0.0 (see module doc)."""
    from devenus.verify import majority_vote

    if len(preds) != len(scores):
        raise ValueError(f"maj@k: {len(preds)} answers but {len(scores)} grades")
    vote = majority_vote(list(preds), verifier=verifier)
    if vote.target is None:
        return 0.0
    for p, s in zip(preds, scores):
        if p == vote.target:
            return float(s)
    raise AssertionError("the vote's target is one of the answers")  # majority_vote returns a raw answer


@dataclass(frozen=True)
class Interval:
    """A point estimate with a 95% percentile-bootstrap interval ``[lo, hi]``."""

    mean: float
    lo: float
    hi: float

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    def as_dict(self) -> dict:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi}

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.lo:.3f}, {self.hi:.3f}]"


def bootstrap_interval(per_question: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Interval:
    """Mean over questions and its percentile-bootstrap interval (questions resampled with replacement)."""
    return bootstrap_macro_interval([per_question], n_boot, seed, level)


def bootstrap_macro_interval(
    groups: Sequence[Sequence[float]], n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> Interval:
    """The unweighted mean of several benchmarks' means (how ID/OOD averages are reported), with a
    bootstrap interval that resamples questions within each benchmark independently."""
    arrays = [np.asarray(g, dtype=float) for g in groups]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("bootstrap over an empty set of questions")
    mean = float(np.mean([a.mean() for a in arrays]))
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_boot)
    for a in arrays:
        idx = rng.integers(0, a.size, size=(n_boot, a.size))
        boots += a[idx].mean(axis=1)
    boots /= len(arrays)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Interval(mean, float(lo), float(hi))


def normal_half_width(per_question: Sequence[float]) -> float:
    """1.96 x the standard error over questions: the interval verl-side reports (recipes) use."""
    n = len(per_question)
    if n < 2:
        return math.nan
    a = np.asarray(per_question, dtype=float)
    return float(1.96 * a.std(ddof=1) / math.sqrt(n))
