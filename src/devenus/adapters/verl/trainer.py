"""DeVenusTrainer: verl's legacy RayPPOTrainer with DE-Venus's four surfaces, never a copy of ``fit()``.

Where each surface runs (the seams verl 0.9.1 offers; see docs/trainer.md):

- after rollout: ``init_workers`` wraps ``async_rollout_manager.generate_sequences``. Training batches
  (not validation ones) get S_y there: the method's targets replace ``ground_truth`` for unlabeled rows,
  which are re-scored by the verifier and written to ``rm_scores`` at the last valid token. Methods that
  need no token statistics also get S_b / S_r / S_a there.
- after the actor's log-prob pass: ``_compute_old_log_prob`` gives methods that need per-token log-probs
  and entropy (``needs`` contains ``token_stats``) their S_b / S_r / S_a; rewards are edited in place in
  ``rm_scores``, the tensor fit() already holds as its reward. ``needs`` with ``self_certainty`` also get
  it from that same forward (the engine extension in :mod:`devenus.adapters.verl.token_stats`).
- before the update: ``_update_actor`` applies admission (zero-weight padding of dropped groups) and
  advantage weights, then adds DE-Venus's metrics to the actor's metrics, which fit() logs.
- checkpoints: ``_save_checkpoint`` / ``_load_checkpoint`` keep the method's state beside verl's.
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from devenus.adapters.verl import surfaces as S
from devenus.adapters.verl import token_stats as TS
from devenus.online import diagnostics as D
from devenus.online.method import OnlineMethod

METHOD_STATE_FILE = "devenus_method.pt"


def save_atomically(obj, path: str) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename it over ``path``: a crash never
    leaves a half-written state file."""
    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f"{os.path.splitext(name)[0]}_", suffix=".tmp")  # torch rejects dot-files
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


class DeVenusTrainer(RayPPOTrainer):
    def __init__(self, *args, method: OnlineMethod, **kwargs):
        self.method = method  # before verl's __init__: its _create_dataloader asks the method for a sampler
        super().__init__(*args, **kwargs)
        # S_b/S_r/S_a wait for the log-prob pass (self-verification runs the actor too, so it waits as well)
        self._late = bool({"token_stats", "self_verification"} & method.needs)
        self._pending: dict[str, float] = {}
        self._hook_s = 0.0  # time spent in DE-Venus's own code this step (bench/trainer_overhead.py)

    @classmethod
    def actor_rollout_worker_class(cls):
        """A subclass of verl's ``ActorRolloutRefWorker`` to run the actor with, or None for verl's own."""
        return None

    @contextmanager
    def _timed(self):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._hook_s += time.perf_counter() - t0

    # ------------------------------------------------------------------------------ after rollout
    def init_workers(self):
        from devenus.adapters.verl import votes as V

        extra, n, default_agent = [], 0, ""
        if self.method.implements("extra_rollouts"):  # vote-on-N: generation-only rollouts per prompt
            n = int(self.config.actor_rollout_ref.rollout.n)
            extra = list(self.method.extra_rollouts(n))
            default_agent = self.config.actor_rollout_ref.rollout.agent.default_agent_loop
            if any(t is not None for t in extra):
                V.install_vote_agent_loop(self.config)  # per-row temperatures, registered before workers start
        TS.check_installed(TS.requested_stats(self.method.needs))  # before any worker starts
        super().init_workers()
        manager = self.async_rollout_manager
        generate = manager.generate_sequences

        def generate_with_supervision(prompts: DataProto) -> DataProto:
            if prompts.meta_info.get("validate", False):
                return generate(prompts)  # validation batches are never touched
            train, step_prompts = None, prompts
            if extra:  # one call generates the N = n + len(extra) rollouts per prompt; M = n of them train
                had_agent = V.AGENT_KEY in prompts.non_tensor_batch
                prompts, train = V.expand_for_votes(prompts, n, extra, default_agent)
            outputs = generate(prompts)
            if extra:
                V.drop_added_columns(outputs, had_agent=had_agent)
            t0 = time.perf_counter()
            votes = self.vote_rollouts(step_prompts, generate)
            if votes is not None:  # more vote-only rows, from another generation (e.g. a teacher's)
                self._pending["devenus/timing_s/vote_rollouts"] = time.perf_counter() - t0
                if train is None:
                    train = np.ones(len(outputs), bool)
                prompts, outputs = S.append_rows(prompts, votes[0]), S.append_rows(outputs, votes[1])
                train = np.concatenate([train, np.zeros(len(votes[1]), bool)])
            with self._timed():
                return self.on_rollouts(prompts, outputs, train_rows=train)

        manager.generate_sequences = generate_with_supervision

    def vote_rollouts(self, prompts: DataProto, generate) -> tuple[DataProto, DataProto] | None:
        """Vote-only rollouts from a separate generation, as (prompts, outputs) with the uids of
        ``prompts`` (the step's training prompts, ``rollout.n`` rows each). None: no such votes (the
        default); :class:`devenus.adapters.verl.teacher.EMATeacherTrainer` returns its teacher's."""
        return None

    def on_rollouts(self, prompts: DataProto, outputs: DataProto, train_rows: np.ndarray | None = None) -> DataProto:
        """S_y (and, for methods without token statistics, S_b/S_r/S_a) on one step's training rollouts.

        With ``train_rows`` (vote-on-N), ``construct_targets`` sees every rollout (``fields["vote_only"]``
        marks the extra ones); then one aligned selection keeps the training rows of prompts, outputs and
        view alike, and everything after (re-scoring, diagnostics, S_b/S_r/S_a) sees only those.
        """
        m = self.method
        view = S.rollout_view(prompts, outputs, self.tokenizer, self.global_steps,
                              decode=m.implements("construct_targets") or "responses" in m.needs)
        new = None
        if m.implements("construct_targets"):
            if train_rows is not None:
                view.fields["vote_only"] = ~np.asarray(train_rows, bool)
            new = m.construct_targets(view)
            if new is not None and len(new) != len(view):
                raise ValueError(f"{m.name}.construct_targets returned {len(new)} targets for {len(view)} rows")
        if train_rows is not None:
            idx = np.flatnonzero(train_rows)
            self._pending["devenus/votes/per_prompt"] = len(view) / max(1, len(set(view.uid.tolist())))
            self._pending["devenus/votes/extra_rows"] = len(view) - len(idx)
            prompts, outputs = S.select_rows(prompts, idx), S.select_rows(outputs, idx)
            view = view.select(idx)
            new = None if new is None else np.asarray(new, dtype=object)[idx]
        constructed = np.full(len(view), None, dtype=object)
        if m.implements("construct_targets"):
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
        # extra per-token statistics (e.g. self-certainty) from the same forward, only if the method needs them
        with TS.collect_extra_stats(self.actor_rollout_wg, self.method) as extra:
            old_log_prob, mfu = super()._compute_old_log_prob(batch)
        with self._timed():
            self._late_surfaces(batch, old_log_prob, extra)
        return old_log_prob, mfu

    def _late_surfaces(self, batch: DataProto, old_log_prob: DataProto, extra: dict | None = None) -> None:
        if self._late:
            view = S.rollout_view(batch, batch, self.tokenizer, self.global_steps, decode="responses" in self.method.needs)
            if S.TARGET_KEY in batch.non_tensor_batch:
                view.target = np.asarray(batch.non_tensor_batch[S.TARGET_KEY], dtype=object)
            view.token_stats = {
                "log_probs": old_log_prob.batch["old_log_probs"],
                "entropy": old_log_prob.batch["entropys"],
                "response_mask": S.response_mask(batch),
                **(extra or {}),
            }
            if "self_verification" in self.method.needs:
                view.fields["self_verification"] = self._self_verification(batch, view)
            self._row_surfaces(view, batch.batch["rm_scores"], S.response_mask(batch), batch.non_tensor_batch)

    def _self_verification(self, batch: DataProto, view) -> np.ndarray:
        """Per row, the actor's P(yes) verdict on the row's answer (NaN: no answer); one actor pass over
        the step's distinct (question, answer) pairs."""
        from devenus.adapters.verl.self_verification import question_text, verdict_probabilities
        from devenus.online.supervise.unsupervised import distinct_candidates

        cfg = self.method.config
        questions = [question_text(batch.non_tensor_batch, i) for i in range(len(view))]
        pairs, idx = distinct_candidates(questions, view.pred)
        t0 = time.perf_counter()
        probs = verdict_probabilities(self, [q for q, _ in pairs], [a for _, a in pairs],
                                      cfg.verification_template, tuple(cfg.verdicts))
        self._pending["devenus/self_verification/candidates"] = len(pairs)
        self._pending["devenus/timing_s/self_verification"] = time.perf_counter() - t0
        return np.where(idx >= 0, probs[np.maximum(idx, 0)] if len(probs) else np.nan, np.nan)

    # ------------------------------------------------------------------------------ before update
    def _update_actor(self, batch: DataProto) -> DataProto:
        with self._timed():
            train, metrics, skip = self._prepare_update(batch)
        if skip:
            return DataProto.from_single_dict(data={}, meta_info={"metrics": metrics})
        out = super()._update_actor(train)
        out.meta_info["metrics"].update(metrics)
        return out

    def _prepare_update(self, batch: DataProto):
        """Admission and advantage weights on a shallow copy of the batch, plus this step's metrics."""
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
        skip = keep is not None and not np.asarray(keep, bool).any()
        if skip:
            self._pending["devenus/update_skipped"] = 1  # nothing admitted: no gradient step this time
        self._pending["devenus/timing_s/hooks"] = self._hook_s
        metrics, self._pending, self._hook_s = self._pending, {}, 0.0
        return train, metrics, skip

    @staticmethod
    def _reward_advantage_metrics(data: DataProto, labeled: np.ndarray) -> dict[str, float]:
        mask = data.batch["response_mask"].bool()
        valid = mask.any(dim=1).cpu().numpy()
        reward = data.batch["token_level_rewards"].sum(dim=1).cpu().numpy()
        adv = (data.batch["advantages"] * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        out = D.by_label_state("devenus/reward", reward, labeled, valid)
        out.update(D.by_label_state("devenus/advantage", adv.cpu().numpy(), labeled, valid))
        return out

    # ------------------------------------------------------------------------------ data
    def _create_dataloader(self, train_dataset, val_dataset, collate_fn, train_sampler):
        """verl's dataloaders, with DE-Venus's sampler seam (``data.sampler.class_path`` / pair sampler)."""
        from devenus.adapters.verl.samplers import create_train_sampler

        if train_dataset is not None:
            custom = create_train_sampler(self.config.data, train_dataset, self.method.needs)
            if custom is not None:
                print(f"[devenus] train sampler: {type(custom).__name__}")
                train_sampler = custom
        super()._create_dataloader(train_dataset, val_dataset, collate_fn, train_sampler)

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
        save_atomically(payload, os.path.join(folder, METHOD_STATE_FILE))

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
