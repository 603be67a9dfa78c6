"""Grade one response against a target: extract, then compare."""

from __future__ import annotations

from dataclasses import dataclass

from .equivalence import Verifier, get_default_verifier
from .extract import ExtractConfig, extract_answer

__all__ = ["GradeResult", "grade"]


@dataclass(frozen=True)
class GradeResult:
    """``score`` is 1.0 when the extracted answer ``pred`` is equivalent to the target, else 0.0."""

    score: float
    pred: str | None


def grade(
    response: str | None,
    target: str | None,
    verifier: Verifier | None = None,
    truncated: bool = False,
    config: ExtractConfig | None = None,
) -> GradeResult:
    """Extract the answer of ``response`` and compare it with ``target``.

    An empty (or None) target means "no trusted target" (an unlabeled row): the score is 0.0 and
    the extracted ``pred`` is still returned, so callers can vote on it. A truncated response has no
    answer (score 0.0, pred None).
    """
    pred = extract_answer(response, config, truncated=truncated)
    if pred is None or target is None or not str(target).strip():
        return GradeResult(0.0, pred)
    v = verifier or get_default_verifier()
    return GradeResult(1.0 if v.equivalent(pred, str(target)) else 0.0, pred)
