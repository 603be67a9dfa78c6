"""Co-rewarding II (Zhang et al., 2025b, model side): an EMA teacher's majority vote labels the student.

A slowly updated copy of the policy, ``theta_T <- (1 - alpha_t) theta_T + alpha_t theta_S`` after every
actor update with ``alpha_t`` annealed (cosine) from ``alpha_start`` = 0.01 to ``alpha_end`` = 1e-5,
generates ``teacher_votes`` rollouts per prompt. The majority answer of those votes (TTRL's
equivalence-aware vote: abstentions, ties and ``min_agreement`` give no target) is the pseudo target
of the student's unlabeled rows. The student is never rewarded for agreeing with its own current
samples, and the teacher lags it, which is what slows the self-reinforcing collapse of TTRL.

This module is the method's logic only (targets, schedule, step counter, the EMA arithmetic). The
teacher's weights live beside the actor's, sharded like them, in the actor workers; the adapter
(:mod:`devenus.adapters.verl.teacher`) generates the teacher's votes by swapping them into the
rollout engine through verl's own weight sync, and saves them in verl's checkpoint folder, so a
resumed run continues with the same teacher (the reference code re-initialises it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from devenus.online.method import MethodConfig, OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.ttrl import VoteStats, vote_only_mask

TEACHER_TRAINER = "devenus.adapters.verl.teacher:EMATeacherTrainer"


@dataclass
class CoRewardingIIConfig(MethodConfig):
    teacher_votes: int = 0  # teacher rollouts per prompt; 0 = actor_rollout_ref.rollout.n
    min_agreement: float = 0.0  # teacher majority ratio below this -> no target
    alpha_start: float = 0.01  # EMA weight of the student after the first update
    alpha_end: float = 1e-5  # ... annealed (cosine) down to this at anneal_steps
    anneal_steps: int = 0  # 0 = trainer.total_training_steps

    def __post_init__(self) -> None:
        if isinstance(self.teacher_votes, bool) or not isinstance(self.teacher_votes, int) or self.teacher_votes < 0:
            raise ValueError(f"teacher_votes must be an integer >= 0 (0 = rollout.n), got {self.teacher_votes!r}")
        if not 0.0 <= float(self.min_agreement) <= 1.0:
            raise ValueError(f"min_agreement must lie in [0, 1], got {self.min_agreement}")
        for k in ("alpha_start", "alpha_end"):
            if not 0.0 <= float(getattr(self, k)) <= 1.0:
                raise ValueError(f"{k} must lie in [0, 1], got {getattr(self, k)}")
        if self.alpha_end > self.alpha_start:
            raise ValueError(f"alpha anneals downwards: alpha_end={self.alpha_end} > alpha_start={self.alpha_start}")
        if self.anneal_steps < 0:
            raise ValueError(f"anneal_steps must be >= 0 (0 = the run's total steps), got {self.anneal_steps}")


def cosine_alpha(update: int, total: int, start: float, end: float) -> float:
    """EMA weight of the ``update``-th teacher update (1-based): ``start`` at 1, ``end`` from ``total`` on."""
    if update <= 1:
        return float(start)
    if update >= total:
        return float(end)
    frac = (update - 1) / (total - 1)
    return float(end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * frac)))


@torch.no_grad()
def ema_update_(teacher: Mapping[str, torch.Tensor], student: Mapping[str, torch.Tensor], alpha: float) -> float:
    """``teacher <- (1 - alpha) teacher + alpha student`` in place, per tensor; returns the squared L2
    distance between the two *after* the update (summed over tensors; callers add the shards' sums)."""
    missing = set(teacher) ^ set(student)
    if missing:
        raise KeyError(f"teacher and student tensors differ: {sorted(missing)[:5]}")
    sq = 0.0
    for name, t in teacher.items():
        s = student[name].detach()
        if s.shape != t.shape:
            raise ValueError(f"{name}: teacher shape {tuple(t.shape)} != student shape {tuple(s.shape)}")
        if t.is_floating_point():
            t.lerp_(s.to(t.dtype), float(alpha))
            sq += float((t.double() - s.double()).pow(2).sum())
    return sq


def tensor_checksum(tensors: Iterable[torch.Tensor]) -> float:
    """A cheap fingerprint (sum of |x|, float64) for checking that a restored teacher is the saved one."""
    return float(sum(t.detach().double().abs().sum() for t in tensors if t.is_floating_point()))


@WeakTrainerInterface.register(trainer=TEACHER_TRAINER)
class CoRewardingII(OnlineMethod):
    name = "corewarding2"
    config_class = CoRewardingIIConfig
    needs = frozenset({"unlabeled", "teacher"})

    def __init__(self, config: CoRewardingIIConfig | None = None):
        super().__init__(config)
        self.teacher_updates = 0  # how many EMA updates the teacher has had (method state)

    # ---- the teacher, as the adapter asks for it -------------------------------------------------
    def teacher_rollouts(self, n: int) -> int:
        """Teacher votes per prompt, given ``n`` = rollout.n (checked before training starts)."""
        return self.config.teacher_votes or n

    def next_alpha(self, total_steps: int) -> float:
        cfg: CoRewardingIIConfig = self.config
        return cosine_alpha(self.teacher_updates + 1, cfg.anneal_steps or total_steps, cfg.alpha_start, cfg.alpha_end)

    def teacher_updated(self, alpha: float, distance: float) -> None:
        self.teacher_updates += 1
        self.log(teacher_alpha=alpha, teacher_distance=distance, teacher_updates=self.teacher_updates)

    # ---- S_y -------------------------------------------------------------------------------------
    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        """The teacher's rows (``vote_only``) vote; the student's unlabeled rows take the majority."""
        from devenus.verify import get_default_verifier, majority_vote

        teacher = vote_only_mask(batch)
        if not teacher.any():
            raise ValueError("corewarding2 got no teacher rollouts (rows marked vote_only): "
                             "it must run with its trainer, devenus.adapters.verl.teacher:EMATeacherTrainer")
        new = np.full(len(batch), None, dtype=object)
        stats = VoteStats()
        verifier = get_default_verifier()
        agree: list[bool] = []
        for rows in batch.groups():
            t_rows, s_rows = rows[teacher[rows]], rows[~teacher[rows]]
            unl = s_rows[~batch.labeled[s_rows]]
            if not len(unl):
                continue
            vote = majority_vote([batch.pred[i] for i in t_rows], min_agreement=self.config.min_agreement)
            stats.add(vote)
            if vote.target is None:
                continue
            new[unl] = vote.target
            agree += [p is not None and bool(verifier.equivalent(p, vote.target)) for p in (batch.pred[i] for i in s_rows)]
        metrics = stats.metrics()
        if agree:
            metrics["student_teacher_agreement"] = float(np.mean(agree))
        self.log(**metrics)
        return new

    # ---- state -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"teacher_updates": self.teacher_updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.teacher_updates = int(state["teacher_updates"])
