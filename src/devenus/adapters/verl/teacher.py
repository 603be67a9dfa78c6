"""An EMA teacher beside the actor, for methods whose ``step_needs`` hold ``teacher`` (Co-rewarding II).

Where the teacher lives: in the actor workers, as a copy of each rank's own parameter shards (FSDP
shards stay shards: one extra sharded copy of the weights per rank, no gather). :class:`TeacherWorker`
is verl's ``ActorRolloutRefWorker`` plus one registered method, ``devenus_teacher(op, ...)``:

- ``init``: teacher <- the actor's current weights (the base model at step 0);
- ``update``: teacher <- (1 - alpha) teacher + alpha actor, after each actor update;
- ``swap_in`` / ``swap_out``: put the teacher's values into the actor's parameters (keeping the
  actor's aside) and back, so that verl's own weight sync (``checkpoint_manager.update_weights``)
  carries the teacher to the rollout engine, whatever that engine is (hf on a CPU, vLLM, SGLang);
- ``save`` / ``load``: one file per rank in verl's checkpoint folder (``devenus_teacher/rank_<r>.pt``,
  written atomically, before verl's own save); removed with the checkpoint when verl's retention
  prunes its actor (:func:`devenus.adapters.verl.checkpoint.prune_step_state`).

:class:`EMATeacherTrainer` (the trainer the method registers with) generates the teacher's votes in
the rollout step: after the student's rollouts, it swaps the teacher in, syncs, generates
``teacher_rollouts(n)`` votes per prompt, swaps the actor back and syncs again. The votes reach
``construct_targets`` as vote-only rows of the same groups and are dropped before the log-prob
passes, like TTRL's extra votes. Cost per step: one generation of the votes and two weight syncs.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from verl import DataProto
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import ActorRolloutRefWorker

from devenus.adapters.verl import votes as vote_rows
from devenus.adapters.verl.trainer import DeVenusTrainer, save_atomically
from devenus.signals import ema_update_, tensor_checksum

TEACHER_DIR = "devenus_teacher"
TEACHER_OPS = ("init", "update", "swap_in", "swap_out", "save", "load")


def _rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


def check_shards(path: str, saved: dict[str, tuple], actor: dict[str, tuple], saved_ranks: int, world: int) -> None:
    """Refuse a teacher checkpoint this run cannot use, in one line. The teacher is each rank's own FSDP
    shards, so it resumes only at the data-parallel size that wrote it: at another GPU count each rank's
    shard covers other rows of every parameter (same names, other shapes). Resharding is not implemented."""
    if saved_ranks != world:
        raise ValueError(f"the EMA teacher in {os.path.dirname(path)} was saved by {saved_ranks} ranks, this run has "
                         f"{world}: its shards resume only at the same GPU count (set trainer.n_gpus_per_node * "
                         f"trainer.nnodes = {saved_ranks}), or start a new run")
    if set(saved) != set(actor):
        missing, extra = sorted(set(actor) - set(saved)), sorted(set(saved) - set(actor))
        raise ValueError(f"{path} holds other parameters than the actor's (missing {missing[:3]}, extra {extra[:3]})")
    wrong = [(k, saved[k], actor[k]) for k in actor if tuple(saved[k]) != tuple(actor[k])]
    if wrong:
        k, a, b = wrong[0]
        raise ValueError(f"{path}: {len(wrong)} teacher shard(s) differ in shape from the actor's (e.g. {k}: saved "
                         f"{tuple(a)}, actor {tuple(b)}): another sharding wrote it; resume at the GPU count that did")


class TeacherWorker(ActorRolloutRefWorker):
    """verl's hybrid actor/rollout/ref worker with an EMA copy of the actor's parameter shards."""

    def _actor_shards(self) -> dict[str, torch.Tensor]:
        # each rank's local shard (a DTensor's local tensor shares the parameter's storage)
        return {name: (p.to_local() if hasattr(p, "to_local") else p).data
                for name, p in self.actor.engine.module.named_parameters()}

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def devenus_teacher(self, op: str, alpha: float | None = None, folder: str | None = None) -> dict:
        if op not in TEACHER_OPS:
            raise ValueError(f"unknown teacher op {op!r}; ops: {TEACHER_OPS}")
        actor = self._actor_shards()
        with torch.no_grad():
            if op == "init":
                self._devenus_teacher = {k: v.detach().clone() for k, v in actor.items()}
                self._devenus_backup = None
            elif op == "load":
                path = os.path.join(folder, TEACHER_DIR, f"rank_{_rank()}.pt")
                if not os.path.exists(path):
                    raise FileNotFoundError(f"no teacher shard at {path}: the checkpoint was written without the "
                                            f"teacher, so the run cannot continue with the same teacher")
                saved = torch.load(path, map_location="cpu", weights_only=True)
                ranks = len([f for f in os.listdir(os.path.dirname(path)) if f.startswith("rank_") and f.endswith(".pt")])
                world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
                check_shards(path, {k: tuple(v.shape) for k, v in saved.items()},
                             {k: tuple(v.shape) for k, v in actor.items()}, ranks, world)
                self._devenus_teacher = {k: saved[k].to(device=v.device, dtype=v.dtype) for k, v in actor.items()}
                self._devenus_backup = None
            teacher = getattr(self, "_devenus_teacher", None)
            if teacher is None:
                raise RuntimeError(f"teacher op {op!r} before the teacher was initialised")
            out: dict = {"rank": _rank()}
            if op == "update":
                if self._devenus_backup is not None:
                    raise RuntimeError("EMA update while the teacher is swapped into the actor")
                out["sq_distance"] = ema_update_(teacher, actor, float(alpha))
            elif op == "swap_in":
                if self._devenus_backup is not None:
                    raise RuntimeError("the teacher is already swapped in")
                self._devenus_backup = {k: v.detach().clone() for k, v in actor.items()}
                for k, v in actor.items():
                    v.copy_(teacher[k])
            elif op == "swap_out":
                if self._devenus_backup is None:
                    raise RuntimeError("swap_out without swap_in")
                for k, v in actor.items():
                    v.copy_(self._devenus_backup[k])
                self._devenus_backup = None
            elif op == "save":
                d = os.path.join(folder, TEACHER_DIR)
                os.makedirs(d, exist_ok=True)
                save_atomically({k: v.detach().cpu() for k, v in teacher.items()}, os.path.join(d, f"rank_{_rank()}.pt"))
            elif op == "load":  # a fingerprint of what was restored, for the log (a pass over the weights: only here)
                out["teacher_checksum"] = tensor_checksum(teacher.values())
            return out


class EMATeacherTrainer(DeVenusTrainer):
    """DeVenusTrainer plus an EMA teacher whose votes are generated in every training step."""

    @classmethod
    def actor_rollout_worker_class(cls):
        return TeacherWorker

    def _teacher(self, op: str, **kw) -> list[dict]:
        return self.actor_rollout_wg.devenus_teacher(op=op, **kw)

    def init_workers(self):
        super().init_workers()
        self._teacher("init")  # the base model; a resumed run replaces it in load_step_state

    # ---- the teacher's votes: one more generation per step, with the teacher's weights -----------
    def vote_rollouts(self, prompts: DataProto, generate) -> tuple[DataProto, DataProto]:
        n = int(self.config.actor_rollout_ref.rollout.n)
        k = int(self.method.teacher_rollouts(n))
        b = vote_rows.check_group_layout(prompts, n)
        teacher_prompts = prompts.select_idxs(np.arange(b) * n).repeat(repeat_times=k, interleave=True)
        self._serve_teacher(True)
        try:
            outputs = generate(teacher_prompts)
        finally:
            self._serve_teacher(False)
        return teacher_prompts, outputs

    def _serve_teacher(self, on: bool) -> None:
        # verl's protocol around a weight sync: replicas asleep, then update_weights wakes them
        self._teacher("swap_in" if on else "swap_out")
        self.checkpoint_manager.sleep_replicas()
        self.checkpoint_manager.update_weights(self.global_steps)

    # ---- EMA update after each actor update -----------------------------------------------------
    def _update_actor(self, batch: DataProto) -> DataProto:
        out = super()._update_actor(batch)
        alpha = self.method.teacher_alpha(self.total_training_steps)
        res = self._teacher("update", alpha=alpha)
        dist = float(sum(r["sq_distance"] for r in res)) ** 0.5
        self.method.teacher_updated(alpha, dist)
        # the method's metrics were already collected for this step: add these to the update's
        out.meta_info.setdefault("metrics", {}).update(
            {f"devenus/{self.method.name}/{k}": v for k, v in self.method.pop_metrics().items()})
        return out

    # ---- checkpoints: the teacher's shards beside the actor's -------------------------------------
    def save_step_state(self, folder: str) -> None:
        super().save_step_state(folder)
        self._teacher("save", folder=os.path.abspath(folder))  # devenus_teacher/: pruned with verl's actor folder

    def load_step_state(self, folder: str) -> None:
        super().load_step_state(folder)
        res = self._teacher("load", folder=folder)
        print(f"[devenus] restored the EMA teacher from {folder} "
              f"(checksum {sum(r['teacher_checksum'] for r in res):.6e}, "
              f"{self.method.teacher_update_count()} updates)")
