"""verl custom reward function for math answers (verl loads it by file path).

verl config::

    reward.custom_reward_function.path=<repo>/src/devenus/verify/reward.py
    reward.custom_reward_function.name=compute_score

It reads only ``solution_str`` and ``ground_truth`` (the current target); ``extra_info`` is
accepted and ignored on purpose, so simulation fields such as ``extra_info.hidden_answer`` can never
leak into the reward.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

try:
    from devenus.verify.grading import grade
except ImportError:  # loaded by path from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from devenus.verify.grading import grade

__all__ = ["compute_score"]


def _text(value: Any) -> str | None:
    """A scalar answer or response as text; None for what is not one (a mapping, a bool, a container)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy scalars
        value = value.item()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _targets(ground_truth: Any) -> list[str]:
    # verl passes whatever the data holds: Parquet lists arrive as numpy arrays, and a bad row may hold
    # bytes, numbers, mappings or nested lists. Anything that is not an answer is no target (score 0).
    if hasattr(ground_truth, "tolist") and getattr(ground_truth, "ndim", 0) > 0:
        ground_truth = ground_truth.tolist()
    items = ground_truth if isinstance(ground_truth, (list, tuple)) else [ground_truth]
    return [t for t in map(_text, items) if t is not None]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one response: ``{"score": 1.0|0.0, "acc": bool, "pred": str}``.

    ``ground_truth`` may be a string or a list of acceptable answers; ``""`` means no trusted
    target (score 0.0, the prediction is still reported). It never raises on what a row holds:
    bytes are decoded, numbers written out, and anything else (a mapping, a bool, a nested list) is
    no target; a ``solution_str`` that is not text has no answer. Pass ``truncated=True`` (e.g. through
    ``reward_kwargs`` or from an adapter that knows the response hit the length limit) to treat
    the response as unanswered. ``pred`` is ``""`` when no answer was extracted.

    Latency: each target costs at most one equivalence call, bounded by the default verifier's
    deadline (under 2x ``DEVENUS_VERIFY_TIMEOUT_S``, queueing for a worker included). A check that
    cannot be decided in time scores 0.0 for this call only; it is not cached, and it is counted in
    ``get_default_verifier().stats.undecided`` and logged. A target that is a single option letter
    (A-J) grades letter answers (``(C)``, ``\\text{C}``, ``option C``, ``c``).
    """
    del data_source, extra_info  # one scorer for all math sources; never read simulation fields
    truncated = bool(kwargs.get("truncated", False))
    targets = _targets(ground_truth) or [""]
    response = _text(solution_str) or ""  # a response that is not text has no answer
    score, pred = 0.0, None
    for t in targets:
        res = grade(response, t, truncated=truncated)
        pred = res.pred
        if res.score > score:
            score = res.score
            break
    return {"score": float(score), "acc": bool(score > 0.5), "pred": pred or ""}
