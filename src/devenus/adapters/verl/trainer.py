"""DeVenusTrainer: verl's legacy RayPPOTrainer with DE-Venus's four surfaces, never a copy of ``fit()``.

Where each surface runs (the seams verl 0.9.1 offers; see docs/trainer.md):

- after rollout: ``init_workers`` wraps ``async_rollout_manager.generate_sequences``. Training batches
  (not validation ones) get S_y there: the method's targets replace ``ground_truth`` for unlabeled rows,
  which are re-scored by the verifier and written to ``rm_scores`` at the last valid token. Methods that
  need no token statistics also get S_b / S_r / S_a there.
- after the actor's log-prob pass: ``_compute_old_log_prob`` gives methods that need per-token log-probs
  and entropy (``needs`` contains ``token_stats``) their S_b / S_r / S_a; rewards are edited in place in
  ``rm_scores``, the tensor fit() already holds as its reward.
- before the update: ``_update_actor`` applies admission (zero-weight padding of dropped groups) and
  advantage weights, then adds DE-Venus's metrics to the actor's metrics, which fit() logs.
- checkpoints: ``_save_checkpoint`` / ``_load_checkpoint`` keep the method's state beside verl's.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from devenus.adapters.verl import surfaces as S
from devenus.online import diagnostics as D
from devenus.online.method import OnlineMethod

METHOD_STATE_FILE = "devenus_method.pt"


class DeVenusTrainer(RayPPOTrainer):
    def __init__(self, *args, method: OnlineMethod, **kwargs):
        super().__init__(*args, **kwargs)
        self.method = method
        self._late = "token_stats" in method.needs  # S_b/S_r/S_a wait for the log-prob pass
        self._pending: dict[str, float] = {}

    # ------------------------------------------------------------------------------ after rollout
    def init_workers(self):
        super().init_workers()
        manager = self.async_rollout_manager
        generate = manager.generate_sequences

        def generate_with_supervision(prompts: DataProto) -> DataProto:
            outputs = generate(prompts)
            if prompts.meta_info.get("validate", False):
                return outputs  # validation batches are never touched
            return self.on_rollouts(prompts, outputs)

        manager.generate_sequences = generate_with_supervision

    def on_rollouts(self, prompts: DataProto, outputs: DataProto) -> DataProto:
        """S_y (and, for methods without token statistics, S_b/S_r/S_a) on one step's training rollouts."""
        m = self.method
        view = S.rollout_view(prompts, outputs, self.tokenizer, self.global_steps,
                              decode=m.implements("construct_targets") or "responses" in m.needs)
        constructed = np.full(len(view), None, dtype=object)
        if m.implements("construct_targets"):
            new = m.construct_targets(view)
            if new is not None:
                constructed = self._substitute_targets(view, np.asarray(new, dtype=object), outputs)
            hidden = D.hidden_answers(prompts.non_tensor_batch.get("simulation"))
            self._pending.update(D.target_metrics(view, constructed, hidden))
            self._pending.update(D.reward_truth_metrics(view, hidden))
        outputs.non_tensor_batch[S.TARGET_KEY] = view.target.copy()
        if not self._late:
            self._row_surfaces(view, outputs.batch["rm_scores"], S.response_mask(outputs), outputs.non_tensor_batch)
        return outputs

    def _substitute_targets(self, view, new: np.ndarray, outputs: DataProto) -> np.ndarray:
        from devenus.verify import grade

        if len(new) != len(view):
            raise ValueError(f"{self.method.name}.construct_targets returned {len(new)} targets for {len(view)} rows")
        allowed = np.ones(len(view), bool) if self.method.may_change_labeled else ~view.labeled
        proposed = np.array([t is not None for t in new])
        self._pending["devenus/target/labeled_protected"] = int((proposed & ~allowed).sum())
        rows = np.flatnonzero(proposed & allowed)
        constructed = np.full(len(view), None, dtype=object)
        for i in rows:
            constructed[i] = str(new[i])
            view.target[i] = constructed[i]
            view.score[i] = grade(view.response[i], constructed[i], truncated=bool(view.truncated[i])).score
        if len(rows):
            S.place_sequence_scores(outputs.batch["rm_scores"], S.response_mask(outputs), view.score,
                                    rows=np.isin(np.arange(len(view)), rows))
        return constructed

    def _row_surfaces(self, view, rm_scores: torch.Tensor, mask: torch.Tensor, non_tensor: dict) -> None:
        """S_b, S_r, S_a for one view whose rows are aligned with ``rm_scores`` and ``non_tensor``."""
        m = self.method
        writable = np.ones(len(view), bool) if m.may_change_labeled else ~view.labeled
        if m.implements("construct_rewards"):
            r = m.construct_rewards(view)
            if r is not None:
                r = np.asarray(r, dtype=np.float64)
                rows = ~np.isnan(r) & writable
                S.place_sequence_scores(rm_scores, mask, np.where(rows, r, 0.0), rows=rows)
                view.score[rows] = r[rows]
        if m.implements("admit"):
            keep = m.admit(view)
            if keep is not None:
                keep = np.asarray(keep, dtype=bool)
                S.check_group_constant(keep, view, "admission")
                non_tensor[S.ADMIT_KEY] = keep
                groups = view.groups()
                self._pending["devenus/groups/admitted"] = sum(bool(keep[g[0]]) for g in groups)
                self._pending["devenus/groups/dropped"] = sum(not keep[g[0]] for g in groups)
        if m.implements("advantage_weights"):
            w = m.advantage_weights(view)
            if w is not None:
                w = np.where(writable, np.asarray(w, dtype=np.float64), 1.0)  # labeled rows keep w = 1
                non_tensor[S.WEIGHT_KEY] = w
                self._pending["devenus/adv_weight/mean"] = float(w.mean())

    # ------------------------------------------------------------------------------ after log-probs
    def _compute_old_log_prob(self, batch: DataProto):
        old_log_prob, mfu = super()._compute_old_log_prob(batch)
        if self._late:
            view = S.rollout_view(batch, batch, self.tokenizer, self.global_steps, decode="responses" in self.method.needs)
            if S.TARGET_KEY in batch.non_tensor_batch:
                view.target = np.asarray(batch.non_tensor_batch[S.TARGET_KEY], dtype=object)
            view.token_stats = {
                "log_probs": old_log_prob.batch["old_log_probs"],
                "entropy": old_log_prob.batch["entropys"],
                "response_mask": S.response_mask(batch),
            }
            self._row_surfaces(view, batch.batch["rm_scores"], S.response_mask(batch), batch.non_tensor_batch)
        return old_log_prob, mfu

    # ------------------------------------------------------------------------------ before update
    def _update_actor(self, batch: DataProto) -> DataProto:
        nt = batch.non_tensor_batch
        labeled, _, _ = S.label_state(nt["extra_info"], nt["reward_model"])
        train = DataProto(batch=batch.batch.copy(), non_tensor_batch=nt, meta_info=batch.meta_info)
        keep = nt.get(S.ADMIT_KEY)
        if keep is not None:
            self._pending["devenus/rows/dropped"] = S.apply_admission(train, keep)
        if S.WEIGHT_KEY in nt:
            S.scale_advantages(train, nt[S.WEIGHT_KEY])
        self._pending.update(self._reward_advantage_metrics(train, labeled))
        self._pending.update({f"devenus/{self.method.name}/{k}": v for k, v in self.method.pop_metrics().items()})
        metrics, self._pending = self._pending, {}
        if keep is not None and not np.asarray(keep, bool).any():
            metrics["devenus/update_skipped"] = 1  # nothing admitted: no gradient step this time
            return DataProto.from_single_dict(data={}, meta_info={"metrics": metrics})
        out = super()._update_actor(train)
        out.meta_info["metrics"].update(metrics)
        return out

    @staticmethod
    def _reward_advantage_metrics(data: DataProto, labeled: np.ndarray) -> dict[str, float]:
        mask = data.batch["response_mask"].bool()
        valid = mask.any(dim=1).cpu().numpy()
        reward = data.batch["token_level_rewards"].sum(dim=1).cpu().numpy()
        adv = (data.batch["advantages"] * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        out = D.by_label_state("devenus/reward", reward, labeled, valid)
        out.update(D.by_label_state("devenus/advantage", adv.cpu().numpy(), labeled, valid))
        return out

    # ------------------------------------------------------------------------------ checkpoints
    def _step_folder(self) -> str:
        cfg = self.config.trainer
        if cfg.resume_mode == "resume_path" and cfg.resume_from_path:
            folder = cfg.resume_from_path
        else:
            folder = os.path.join(cfg.default_local_dir, f"global_step_{self.global_steps}")
        return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)

    def _save_checkpoint(self):
        super()._save_checkpoint()
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        os.makedirs(folder, exist_ok=True)
        payload = {"method": self.method.name, "step": self.global_steps, "state": self.method.state_dict()}
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="devenus_method_", suffix=".tmp")  # torch rejects dot-files
        os.close(fd)
        try:
            torch.save(payload, tmp)
            os.replace(tmp, os.path.join(folder, METHOD_STATE_FILE))
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def _load_checkpoint(self):
        result = super()._load_checkpoint()
        if self.global_steps > 0:
            path = os.path.join(self._step_folder(), METHOD_STATE_FILE)
            if os.path.exists(path):
                payload = torch.load(path, weights_only=False)
                if payload["method"] != self.method.name:
                    raise ValueError(f"checkpoint {path} holds state of method {payload['method']!r}, "
                                     f"this run uses {self.method.name!r}")
                self.method.load_state_dict(payload["state"])
                print(f"[devenus] restored {self.method.name} state from {path}")
            elif self.method.state_dict():
                raise FileNotFoundError(f"resuming at step {self.global_steps} without {path}: "
                                        f"{self.method.name} cannot make the same decisions without its state")
        return result
