"""TraPO (Yang et al. 2025b): admit unlabeled samples whose pass-rate trajectory looks like those of
reliable samples.

Every visit of a sample appends one point to its trajectory: labeled -> true pass rate (share of the
group's rollouts scored > 0.5 against the gold target); unlabeled -> majority pass rate (share in the
unique majority cluster; tie or no answer -> 0). Trajectories keep their *first* ``max_points`` points
(visits are epochs, so first points align in training time; later points are not needed because
scores use a common prefix).

Scoring an unlabeled sample from its visit ``warmup`` + 1 on (the reference's 0-based ``epoch >=
warm_up``; before that it is dropped: during warm-up only labeled rows train): the reference set is every labeled sample plus every unlabeled sample already
judged reliable (admitted by its score, not by the top-k quota), itself excluded, each with >= 2
points. L = min(the candidate's length, the shortest reference length); each trajectory's first L
points are z-normalised (x - mean) / std; a constant trajectory (std = 0) becomes the zero vector,
whose cosine with anything is 0, so it is admitted only through the top-k quota. score = the mean
cosine similarity to the reference set. No reference trajectory, or L < 2: the sample is not scored
(dropped this visit).

Admission, decided with the targets (S_y): among scored unlabeled groups, all with score >= ``min_score``
plus the top ``top_fraction`` (floor, at least 1; ties broken by batch order; a NaN score is no score).
Admitted unlabeled groups train against their majority answer; a group without a majority is dropped.
S_b admits every labeled group and exactly the unlabeled groups S_y gave a target (``batch.constructed``).
The reference set is live (each member's trajectory as it is now) and never holds the candidate itself;
docs/methods/trapo.md says how the reference code differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from devenus.online.config import MethodConfig, option
from devenus.online.refine.method import RefineMethod
from devenus.online.rollouts import RolloutBatch, observe_groups
from devenus.online.registry import WeakTrainerInterface
from devenus.signals.trajectory import EPS, cosine, znorm  # noqa: F401  (znorm: part of this rule's API)


@dataclass
class TraPOConfig(MethodConfig):
    warmup: int = option(8, "visits of an unlabeled sample before it is scored: scored from visit warmup + 1 on, "
                            "as the reference's 0-based `epoch >= warm_up` (dropped until then)", ge=0)
    min_score: float = option(0.4, "unlabeled samples with mean cosine similarity >= this are admitted and join "
                                   "the reference set", ge=-1.0, le=1.0)
    top_fraction: float = option(0.1, "share of the batch's scored unlabeled samples admitted by rank "
                                      "(floor, at least 1)", ge=0.0, le=1.0)
    max_points: int = option(32, "trajectory points kept per sample (the first ones); bounds memory", ge=2)

    def check(self) -> None:
        from devenus.online.config import ConfigError

        if self.max_points <= self.warmup:  # a sample is first scored with warmup + 1 points
            raise ConfigError(f"devenus.method_config.max_points={self.max_points} must be > "
                              f"devenus.method_config.warmup={self.warmup}")


def trajectory_score(candidate: list[float], references: list[list[float]]) -> float | None:
    """Mean cosine similarity of the z-normalised common prefix to each reference; None when unscorable
    (no reference with >= 2 points, a candidate under 2 points, or a NaN in the candidate's prefix). A
    reference whose prefix holds a NaN is left out of the set: a NaN never counts as a similarity."""
    refs = [r for r in references if len(r) >= 2]
    if not refs or len(candidate) < 2:
        return None
    L = min(len(candidate), min(len(r) for r in refs))
    c = znorm(candidate[:L])
    if np.isnan(c).any():
        return None
    sims = [cosine(c, znorm(r[:L])) for r in refs]
    sims = [x for x in sims if not math.isnan(x)]
    return float(np.mean(sims)) if sims else None


def top_k(n_scored: int, top_fraction: float) -> int:
    """The quota admitted by rank among ``n_scored`` scored samples: floor(top_fraction x n_scored), at least 1
    (0 when nothing is scored)."""
    return max(1, math.floor(top_fraction * n_scored + EPS)) if n_scored else 0


def admit_scored(scores: list[float | None], min_score: float, top_fraction: float) -> list[bool]:
    """Per unlabeled sample: admitted (score >= min_score, or in the top floor(top_fraction * n_scored),
    at least 1); unscored ones (None, or NaN: no score) never, and they do not count in n_scored."""
    scores = [None if s is None or math.isnan(s) else s for s in scores]
    scored = [i for i, s in enumerate(scores) if s is not None]
    keep = [s is not None and s >= min_score - EPS for s in scores]
    if scored:
        ranked = sorted(scored, key=lambda i: -scores[i])  # stable: batch order breaks ties
        for i in ranked[:top_k(len(scored), top_fraction)]:
            keep[i] = True
    return keep


@WeakTrainerInterface.register
class TraPO(RefineMethod):
    name = "trapo"
    mechanism_metrics = frozenset({"admission"})
    config_class = TraPOConfig
    data_needs = frozenset({"labels", "unlabeled"})

    def __init__(self, config: TraPOConfig | None = None):
        super().__init__(config)
        self.trajectories: dict[str, list[float]] = {}
        self.reliable: set[str] = set()
        self.labeled: set[str] = set()
        self.visits: dict[str, int] = {}
        self._judged: set[str] = set()  # uids of this visit's unlabeled groups that were scored

    def _point(self, key: str, value: float) -> list[float]:
        t = self.trajectories.setdefault(key, [])
        if len(t) < self.config.max_points:
            t.append(float(value))
        self.visits[key] = self.visits.get(key, 0) + 1
        return t

    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        """The visit's points, the unlabeled samples' scores and admission; an admitted unlabeled group's
        target is its majority answer, and that target is what admission means to S_b (:meth:`admit`)."""
        new = np.full(len(batch), None, dtype=object)
        observed = observe_groups(batch)
        for rows, v in observed:  # every point first: this step's labeled points are part of the reference
            key = str(batch.key[rows[0]])
            self._point(key, (v.target_pass_rate or 0.0) if v.labeled else v.majority_pass_rate)
            if v.labeled:
                self.labeled.add(key)
        unl = [(rows, v) for rows, v in observed if not v.labeled]
        scores = [self._score(str(batch.key[rows[0]])) for rows, _ in unl]
        keep = admit_scored(scores, self.config.min_score, self.config.top_fraction)
        self._judged = {str(batch.uid[rows[0]]) for (rows, _), s in zip(unl, scores) if s is not None}
        admitted: dict[str, bool] = {}  # per group (uid), for this visit's evidence
        for (rows, v), s, k in zip(unl, scores, keep):
            key = str(batch.key[rows[0]])
            k = k and v.majority is not None  # nothing to train against
            if s is not None and s >= self.config.min_score - EPS:
                self.reliable.add(key)
            admitted[str(batch.uid[rows[0]])] = k
            if k:
                new[rows] = v.majority
        by_key = {str(batch.key[rows[0]]): s for (rows, _), s in zip(unl, scores)}
        for rows, v in observed:
            key = str(batch.key[rows[0]])
            self.evidence(key, v, point=self.trajectories[key][-1], points=len(self.trajectories[key]),
                          score=by_key.get(key), admitted=admitted.get(str(batch.uid[rows[0]]), True))
        n_scored = sum(s is not None for s in scores)
        n_admitted = sum(admitted.values())
        self.log(unlabeled_groups=len(unl), scored=n_scored, admitted_unlabeled=n_admitted,
                 admitted_share_unlabeled=(n_admitted / len(unl)) if unl else 0.0,
                 reliable=len(self.reliable), reference_size=len(self.reliable) + len(self.labeled),
                 mean_score=float(np.mean([s for s in scores if s is not None])) if n_scored else 0.0)
        return new

    def _score(self, key: str) -> float | None:
        """An unlabeled sample's score at this visit; None during its warm-up or when unscorable."""
        if self.visits[key] <= self.config.warmup:
            return None
        refs = [tr for k, tr in self.trajectories.items() if k != key and (k in self.reliable or k in self.labeled)]
        return trajectory_score(self.trajectories[key], refs)

    def admit(self, batch: RolloutBatch) -> np.ndarray:
        """Every labeled group, and the unlabeled groups S_y gave their majority answer (the step passes
        S_y's outcome as ``batch.constructed``)."""
        return np.asarray(batch.labeled, bool) | batch.constructed

    def admission_judged(self, batch: RolloutBatch) -> np.ndarray:
        """Labeled groups and the unlabeled ones scored this visit; a group in its warm-up, or unscorable,
        is dropped without a decision."""
        return np.asarray(batch.labeled, bool) | np.array([str(u) in self._judged for u in batch.uid], dtype=bool)

    def state_dict(self) -> dict[str, Any]:
        return {"trajectories": {k: list(v) for k, v in self.trajectories.items()}, "reliable": sorted(self.reliable),
                "visits": dict(self.visits), "labeled": sorted(self.labeled)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.trajectories = {str(k): [float(x) for x in v] for k, v in state["trajectories"].items()}
        self.reliable = set(state["reliable"])
        self.visits = {str(k): int(v) for k, v in state["visits"].items()}
        self.labeled = set(state["labeled"])
