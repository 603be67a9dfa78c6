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

from dataclasses import dataclass
from typing import Any

import numpy as np

from devenus.online.config import ConfigError, MethodConfig, option
from devenus.online.method import OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.signals import VoteStats, cosine_alpha

TEACHER_TRAINER = "devenus.adapters.verl.teacher:EMATeacherTrainer"


@dataclass
class CoRewardingIIConfig(MethodConfig):
    teacher_votes: int = option(0, "teacher rollouts per prompt; 0 = actor_rollout_ref.rollout.n", ge=0)
    min_agreement: float = option(0.0, "teacher majority ratio below this -> no target", ge=0.0, le=1.0)
    alpha_start: float = option(0.01, "EMA weight of the student after the first update", ge=0.0, le=1.0)
    alpha_end: float = option(1e-5, "... annealed (cosine) down to this at anneal_steps", ge=0.0, le=1.0)
    anneal_steps: int = option(0, "updates over which alpha anneals; 0 = trainer.total_training_steps", ge=0)

    def check(self) -> None:
        if self.alpha_end > self.alpha_start:
            raise ConfigError(f"alpha anneals downwards: devenus.method_config.alpha_end={self.alpha_end} > "
                              f"devenus.method_config.alpha_start={self.alpha_start}")


@WeakTrainerInterface.register(trainer=TEACHER_TRAINER)
class CoRewardingII(OnlineMethod):
    name = "corewarding2"
    mechanism_metrics = frozenset({"pseudo_target"})
    config_class = CoRewardingIIConfig
    data_needs = frozenset({"unlabeled"})
    step_needs = frozenset({"teacher"})

    def __init__(self, config: CoRewardingIIConfig | None = None):
        super().__init__(config)
        self.teacher_updates = 0  # how many EMA updates the teacher has had (method state)

    # ---- the teacher, as the adapter asks for it -------------------------------------------------
    def teacher_rollouts(self, n: int) -> int:
        """Teacher votes per prompt, given ``n`` = rollout.n (checked before training starts)."""
        return self.config.teacher_votes or n

    def teacher_alpha(self, total_steps: int) -> float:
        cfg: CoRewardingIIConfig = self.config
        return cosine_alpha(self.teacher_updates + 1, cfg.anneal_steps or total_steps, cfg.alpha_start, cfg.alpha_end)

    def teacher_updated(self, alpha: float, distance: float) -> None:
        self.teacher_updates += 1
        self.log(teacher_alpha=alpha, teacher_distance=distance, teacher_updates=self.teacher_updates)

    def teacher_update_count(self) -> int:
        return self.teacher_updates

    # ---- S_y -------------------------------------------------------------------------------------
    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        """The teacher's rows (``vote_only``) vote; the student's unlabeled rows take the majority."""
        from devenus.verify import get_default_verifier, majority_vote

        teacher = batch.vote_only
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
