"""Accuracy of a policy on testbed splits, with question-clustered confidence intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from devenus.testbed.sampling import sample


@dataclass(frozen=True)
class Accuracy:
    mean: float
    ci95: float  # half-width of a normal-approximation interval over per-question means
    n_questions: int
    n_samples: int  # per question
    per_question: tuple[float, ...] = field(repr=False, default=())

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.ci95:.3f}"


def summarize(per_question: Sequence[float], n_samples: int) -> Accuracy:
    """Mean and 95% CI treating questions (not samples) as the unit: samples of one question correlate."""
    n = len(per_question)
    if n == 0:
        return Accuracy(float("nan"), float("nan"), 0, n_samples)
    mean = sum(per_question) / n
    var = sum((x - mean) ** 2 for x in per_question) / max(n - 1, 1)
    ci = 1.96 * math.sqrt(var / n) if n > 1 else float("nan")
    return Accuracy(mean, ci, n, n_samples, tuple(per_question))


def accuracy(
    model,
    tokenizer,
    questions: Sequence[str],
    answers: Sequence[str],
    n_samples: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 96,
    seed: int = 0,
) -> Accuracy:
    """Sampled pass@1 (avg@n_samples) or greedy accuracy (temperature 0) against the given answers."""
    from devenus.verify import grade

    completions = sample(model, tokenizer, questions, n_samples, temperature, max_new_tokens, seed=seed)
    return summarize([sum(grade(c.text, ans, truncated=c.truncated).score for c in comps) / len(comps)
                      for comps, ans in zip(completions, answers)], n_samples)
