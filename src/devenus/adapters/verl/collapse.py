"""The collapse guard's trainer hook (``devenus.collapse_guard``): the rule is
:mod:`devenus.online.collapse_guard`; this mixin only feeds it and carries out its decision.

- ``collapse_guard_step(batch, metrics)``, called by ``DeVenusTrainer._update_actor`` once the step's
  metrics are complete: observations from the training batch (and the step's reward accuracy vs the
  truth, where the run has simulation truth), metrics ``devenus/collapse/...`` into the step's metrics
  (verl's trackers log them). When the guard acts: ``rollback`` points verl's resume pointer
  (``latest_checkpointed_iteration.txt``, atomically) at the last complete checkpoint saved before the
  collapse, or moves it aside when there is none (a resume then starts from the base model), once fit()
  has ended: the step is chosen then, after fit's own save of the acting step (which rewrites the
  pointer), among the checkpoints on disk at that moment; ``collapse_guard.json`` in
  ``trainer.default_local_dir`` records the decision; the run stops at the next step.
- verl's retention (``trainer.max_actor_ckpt_to_keep``) is held for every save made while a streak of
  flagged steps runs or after the guard acted (rollback only): the checkpoints from before the onset,
  the rollback candidates, survive until the rollback (:func:`.checkpoint.retention_held`).
- how it stops without copying fit(): the stop every rule shares (:mod:`.stop`): this step's metrics are
  logged by fit() as usual; the next training generation raises before anything is generated, and
  ``fit`` (wrapped, not copied) returns. Nothing of the next step has run; the rollback is chosen after.
- the guard's state is saved beside each checkpoint (``devenus_collapse_guard.json``) and restored on
  resume, so a resumed run keeps its baselines and streak.

Wiring: ``class DeVenusTrainer(RolloutBudgetMixin, CollapseGuardMixin, RayPPOTrainer)`` and, at the end of
``DeVenusTrainer._update_actor``, ``self.collapse_guard_step(batch, out.meta_info["metrics"])``.
"""

from __future__ import annotations

import json
import os

import numpy as np

from devenus.adapters.verl.checkpoint import TRACKER_FILE, StepStateHooks, complete_steps, retention_held
from devenus.adapters.verl.stop import StopMixin
from devenus.online.collapse_guard import REWARD_ACCURACY_METRIC, CollapseGuard, batch_observations

STATE_FILE = "devenus_collapse_guard.json"
RESULT_FILE = "collapse_guard.json"


def _write_json(path: str, payload: dict) -> None:
    from devenus.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")


def rollback_pointer(folder: str, step: int | None) -> str:
    """Point verl's resume pointer at ``step`` (atomically); None: move the pointer aside. Returns what it did."""
    from devenus.atomic import commit_temp, write_text_atomic

    path = os.path.join(folder, TRACKER_FILE)
    if step is None:
        if os.path.exists(path):
            commit_temp(path, path + ".collapsed")  # the tree's one rename (devenus.atomic), directory synced
        return f"no checkpoint before the collapse: moved {path} aside, a resume starts from the base model"
    write_text_atomic(path, str(step))
    return f"{path} now points at global_step_{step}"


class CollapseGuardMixin(StopMixin, StepStateHooks):
    """Mixed in before verl's RayPPOTrainer; does nothing unless ``devenus.collapse_guard.enabled`` (read from
    the host trainer's typed ``overlay``)."""

    _collapse_guard: CollapseGuard | bool | None = None  # False: read once, disabled
    _collapse_result: dict | None = None  # the guard's decision once it acted

    def collapse_guard(self) -> CollapseGuard | None:
        if self._collapse_guard is None:  # the config is read once: a disabled guard costs one check a step
            cfg = self.overlay.collapse_guard
            self._collapse_guard = CollapseGuard(cfg) if cfg.enabled else False
        return self._collapse_guard or None

    # ------------------------------------------------------------------------------ the step
    def collapse_guard_step(self, batch, metrics: dict) -> None:
        guard = self.collapse_guard()
        if guard is None:
            return
        from devenus.adapters.verl import surfaces

        nt = batch.non_tensor_batch
        labeled, _, _ = surfaces.label_state(nt["extra_info"], nt["reward_model"])
        unl = ~np.asarray(labeled, bool)
        lp = batch.batch["old_log_probs"].float().numpy() if "old_log_probs" in batch.batch.keys() else None
        obs = batch_observations(batch.batch["responses"].numpy(), surfaces.response_mask(batch).bool().numpy(),
                                 np.asarray(nt["uid"], dtype=object), unl if unl.any() else None, lp,
                                 guard.config.ngram)
        if REWARD_ACCURACY_METRIC in metrics:
            obs["reward_accuracy"] = float(metrics[REWARD_ACCURACY_METRIC])
        decision = guard.observe(int(self.global_steps), obs)
        metrics.update(decision.metrics)
        if decision.act:
            metrics.update(self._collapse_act(guard, decision))

    def _collapse_act(self, guard: CollapseGuard, decision) -> dict:
        folder = self.config.trainer.default_local_dir
        cfg = guard.config
        result = {"stopped_for": "collapse", "step": decision.step, "onset": decision.onset,
                  "flags": list(decision.flags), "action": cfg.action, "rollback_to": None,
                  "last_step": bool(decision.step >= self.total_training_steps)}
        msg = (f"[devenus] collapse guard: collapse at step {decision.step} (onset step {decision.onset}, "
               f"{', '.join(decision.flags)} for {decision.streak} steps)")
        if cfg.action == "rollback":  # the plan; chosen again when fit() has ended (its save of this step writes the pointer)
            result["rollback_to"] = guard.good_checkpoint(complete_steps(folder))
            msg += f"; rollback to {'the base model' if result['rollback_to'] is None else result['rollback_to']}"
        msg += "; stopping the run" if not result["last_step"] else "; it was the last step"
        result["message"] = msg
        os.makedirs(folder, exist_ok=True)
        _write_json(os.path.join(folder, RESULT_FILE), result)
        print(msg, flush=True)
        self._collapse_result = result
        self.request_stop(result)
        return {"devenus/collapse/stop_step": float(decision.step),
                "devenus/collapse/rollback_step": float(-1 if result["rollback_to"] is None else result["rollback_to"])}

    # ------------------------------------------------------------------------------ after fit()
    def fit(self):
        out = super().fit()  # the shared stop (StopMixin) ends fit() at the step after the guard acted
        if self._collapse_result is not None:  # also when it acted at the last step, or another rule stopped the run
            self._collapse_finish(self._collapse_result)
        return out

    def _collapse_finish(self, result: dict) -> None:
        """Rollback after fit() has ended: verl's save of the acting step rewrote the pointer to that step.
        The step is chosen now, among the complete checkpoints on disk after every save of the run, so
        the pointer names one that exists (held retention kept the candidates: normally the plan)."""
        if result["action"] != "rollback":
            return
        folder = self.config.trainer.default_local_dir
        result["rollback_to"] = self._collapse_guard.good_checkpoint(complete_steps(folder))
        result["pointer"] = rollback_pointer(folder, result["rollback_to"])
        _write_json(os.path.join(folder, RESULT_FILE), result)
        print(f"[devenus] collapse guard rollback: {result['pointer']}", flush=True)

    # ------------------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self):
        guard = self._collapse_guard or None
        with retention_held(self.config.trainer, guard is not None and guard.holds_checkpoints):
            super()._save_checkpoint()

    def save_step_state(self, folder: str) -> None:
        super().save_step_state(folder)
        guard = self._collapse_guard or None
        if guard is not None:
            _write_json(os.path.join(folder, STATE_FILE), guard.state_dict())

    def load_step_state(self, folder: str) -> None:
        super().load_step_state(folder)
        guard = self.collapse_guard()
        path = os.path.join(folder, STATE_FILE)
        if guard is not None and os.path.exists(path):
            with open(path) as f:
                guard.load_state_dict(json.load(f))
            print(f"[devenus] restored the collapse guard's state from {path}")
