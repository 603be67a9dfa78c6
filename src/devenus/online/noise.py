"""Simulated active label noise, redrawn online: the OLR reference's "strong" noise, verl-free.

The reference (ShenzhiYang2000/OLR, ``verl/trainer/ppo/ray_trainer.py``,
``_generate_pseudo_labels_and_update_passrate_strong_noise_label``) gives a noisy row, at every visit, a
wrong answer drawn uniformly from the distinct answers of that step's own rollouts of the row, and keeps
its sentinel target (no rollout can match it) when the step produced no wrong answer. The rule here is
that, applied by :class:`devenus.online.step.StepRules` before the method's S_y, so every method sees the
redrawn target as the row's given label:

- only rows marked ``simulation.noise == "redraw"`` are redrawn (the adapter carries the mark, the hidden
  answer and the noise seed in the view's :data:`REDRAW_FIELD`; the step removes that field before any
  method sees the view, since it holds simulation truth);
- candidates: one per cluster of equivalent answers among the group's rollouts (truncated responses have
  none), its most frequent raw form, leaving out every cluster equivalent to the hidden answer (the
  reference compares strings, so a differently written correct answer can be drawn there; not here);
- the draw is seeded by (noise seed, step, sample key), over the candidates in sorted order, so runs are
  reproducible and arms of one seed paired: the same rollouts give the same draw;
- no candidate: the target is :data:`devenus.verify.UNMATCHABLE` (the reference's ``__NoCorrectAnswer__``);
- the group's rows are re-graded against the new target by the same grading as substituted targets.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

import numpy as np

from devenus.online.rollouts import RolloutBatch

#: the view's per-row field with ``{"hidden": str, "seed": int}`` for rows marked for redraw, else None
REDRAW_FIELD = "noise_redraw"
NOISE_REDRAW = "redraw"  # the ``simulation.noise`` kind


def redraw_marks(simulation: Sequence | None) -> np.ndarray | None:
    """Per row, ``{"hidden", "seed"}`` when its ``simulation`` marks it for redraw, else None; None when no
    row is marked (the view then carries no field at all)."""
    if simulation is None:
        return None
    out = np.full(len(simulation), None, dtype=object)
    for i, s in enumerate(simulation):
        if isinstance(s, dict) and s.get("noise") == NOISE_REDRAW:
            hidden, seed = s.get("hidden_answer"), s.get("noise_seed")
            if hidden is None or seed is None:
                raise ValueError(f"row {i}: simulation.noise is 'redraw' but hidden_answer or noise_seed is missing "
                                 f"(write the data with `devenus testbed noise --regime redraw`)")
            out[i] = {"hidden": str(hidden), "seed": int(seed)}
    return out if any(m is not None for m in out) else None


def wrong_candidates(preds: Sequence[str | None], hidden: str) -> list[str]:
    """One raw answer per cluster of ``preds`` not equivalent to ``hidden``, sorted."""
    from devenus.verify import get_default_verifier, majority_vote

    vote = majority_vote(list(preds))
    v = get_default_verifier()
    raw: dict[int, dict[str, int]] = {}
    for a, c in zip(preds, vote.cluster_of):
        if c is not None:
            raw.setdefault(c, {}).setdefault(a, 0)
            raw[c][a] += 1
    reps = [max(sorted(forms), key=lambda r: forms[r]) for forms in raw.values()]  # sorted: ties by string
    return sorted(r for r in reps if not v.equivalent(r, hidden))


def draw(candidates: Sequence[str], seed: int, step: int, key: str) -> str:
    """The redrawn target of one visit: seeded by (seed, step, key); the sentinel when there is no candidate."""
    from devenus.verify import UNMATCHABLE

    if not candidates:
        return UNMATCHABLE
    return random.Random(f"noise-redraw:{seed}:{step}:{key}").choice(list(candidates))


def redraw_noisy_targets(view: RolloutBatch, grade: Callable[[str, str, bool], float]) -> tuple[np.ndarray, dict[str, float]]:
    """In place on ``view``: marked groups get their redrawn target and re-graded scores; the mark field is
    removed. Returns (rows re-graded, metrics)."""
    marks = view.fields.pop(REDRAW_FIELD, None)
    regraded = np.zeros(len(view), bool)
    if marks is None:
        return regraded, {}
    if view.response is None:
        raise ValueError("redrawn noise needs the decoded responses in the view (re-grading against the new target)")
    redrawn = fallback = 0
    for rows in view.groups():
        mark = marks[rows[0]]
        if mark is None:
            continue
        cands = wrong_candidates([view.pred[i] for i in rows], mark["hidden"])
        target = draw(cands, mark["seed"], int(view.step), str(view.key[rows[0]]))
        redrawn += bool(cands)
        fallback += not cands
        for i in rows:
            view.target[i] = target
            view.score[i] = grade(view.response[i], target, bool(view.truncated[i]))
            regraded[i] = True
    return regraded, {"devenus/noise/redrawn": redrawn, "devenus/noise/no_wrong_answer": fallback}
