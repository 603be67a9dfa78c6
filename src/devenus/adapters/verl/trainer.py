"""DeVenusTrainer: verl's legacy RayPPOTrainer with DE-Venus's four surfaces, never a copy of ``fit()``.

The trainer decides nothing: :class:`devenus.online.step.StepRules` (verl-free) makes every decision of
the step; this class builds its view of verl's DataProto (:mod:`.surfaces`) at the seams verl 0.9.1
offers, and writes the decisions back into verl's native contracts (see docs/trainer.md):

- after rollout: ``init_workers`` wraps ``async_rollout_manager.generate_sequences``. Training batches
  (not validation ones) get S_y there: substituted targets are re-graded and written to ``rm_scores``
  at the last valid token. S_b / S_r / S_a run there too, unless the rules say they wait for the
  actor's log-prob pass.
- after the actor's log-prob pass: ``_compute_old_log_prob`` hands per-token log-probs and entropy
  (and, when the method's ``step_needs`` ask, self-certainty from the same forward, via the engine
  extension in :mod:`.token_stats`) to the late S_b / S_r / S_a; rewards are edited in place in
  ``rm_scores``, the tensor fit() already holds as its reward.
- before the update: ``_update_actor`` applies admission (zero-weight padding of dropped groups) and
  advantage weights, then adds DE-Venus's metrics to the actor's metrics, which fit() logs.
- checkpoints: ``_save_checkpoint`` / ``_load_checkpoint`` run the ``save_step_state`` / ``load_step_state``
  chain every layer joins (the method, the rules' mixins, the EMA teacher: :class:`.checkpoint.StepStateHooks`),
  written before verl's save, whose resume pointer then commits both, and after each save prune
  DE-Venus's state of the checkpoints verl's retention removed (:mod:`.checkpoint`).
- dynamic sampling (``devenus.dynamic_sampling``, :mod:`.sampling`): ``_compute_old_log_prob`` drops
  zero-variance groups (and a pre-rollout filter's placeholder slots) and refills their slots in place
  from further prompts; off, it returns at once.
- probe passes (``devenus.probe``, :mod:`.probe`): after the actor update of every k-th step,
  ``_update_actor`` generates rollouts for the probe set through the same rollout manager (no update
  follows) and hands them to the method as visits; their evidence is written in the same step.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

import numpy as np
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from devenus.adapters.verl import checkpoint as ckpt
from devenus.adapters.verl import sampling as dynamic
from devenus.adapters.verl import seams, surfaces, token_stats
from devenus.adapters.verl import votes as vote_rows
from devenus.adapters.verl.budget import RolloutBudgetMixin  # rollout budget (devenus.budget)
from devenus.adapters.verl.collapse import CollapseGuardMixin  # collapse guard (devenus.collapse_guard)
from devenus.adapters.verl.overlay import DevenusConfig, check_overlay
from devenus.online import diagnostics
from devenus.online import probe as probes
from devenus.online.sampling import dynamic_sampling as sampling, skipping
from devenus.online.method import OnlineMethod
from devenus.online.step import RowDecisions, StepRules

METHOD_STATE_FILE = "devenus_method.pt"
SAMPLING_STATE_FILE = "devenus_sampling.pt"  # the refill cursor, beside the method state
seams.check()  # every private verl member used below exists in the installed verl, or one clear error now


def save_atomically(obj, path: str) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename it over ``path``: a crash never
    leaves a half-written state file."""
    from devenus.atomic import atomic_write

    with atomic_write(path, hidden=False) as tmp:  # torch rejects dot-files
        torch.save(obj, str(tmp))


class DeVenusTrainer(RolloutBudgetMixin, CollapseGuardMixin, RayPPOTrainer):
    # dynamic sampling (class defaults: off, as for a trainer built without verl's __init__ in tests)
    sampling_config = sampling.DynamicSamplingConfig()
    # a rule that skips prompts before rollout (their slots become placeholders that refill fills);
    # None: every prompt is generated
    pre_rollout_filter: sampling.PreRolloutFilter | None = None
    _refill_order: sampling.RefillOrder | None = None
    _refill_state: dict | None = None  # a restored cursor, applied when the order is first built
    _filter_off = False  # the placeholders' last refill generates without the filter
    _skip_granule: int | None = None  # prompts a filtered generate call keeps a multiple of (read once)
    _rollouts_generated = 0  # responses generated for this training step (devenus/rollouts/generated)
    _generation_s = 0.0  # wall seconds of this step's training generate calls (devenus/timing_s/generation)

    def __init__(self, *args, method: OnlineMethod, overlay: DevenusConfig | None = None, **kwargs):
        self.method = method  # before verl's __init__: its _create_dataloader asks the method for a sampler
        self.rules = StepRules(method)
        self._overlay = overlay
        super().__init__(*args, **kwargs)
        self.probe_config = self.overlay.probe
        self._probe_rows: np.ndarray | None = None  # dataset indices of the probe set, drawn on first use
        self.sampling_config = self.overlay.dynamic_sampling
        skip = self.overlay.skip
        if skip.enabled:  # GRESO's rule: prompts whose history predicts a zero-variance group are never generated
            self.pre_rollout_filter = skipping.SkipRule(skip, seed=int(self.config.data.get("seed", None) or 0))
            seeded = self.pre_rollout_filter.seed_from_dirs(skip.history_dirs)
            if skip.history_dirs:
                print(f"[devenus] skip: {seeded} visits of earlier rounds seed the histories ({len(skip.history_dirs)} folders)")
        self._generate_raw = None  # verl's own generate_sequences, before DE-Venus wraps it
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

    def _view(self, prompts: DataProto, outputs: DataProto):
        return surfaces.rollout_view(prompts, outputs, self.tokenizer, self.global_steps,
                                     decode=self.rules.decode_responses)

    # ------------------------------------------------------------------------------ after rollout
    def init_workers(self):
        extra, n, default_agent = [], 0, ""
        if self.method.implements("extra_rollouts"):  # vote-on-N: generation-only rollouts per prompt
            n = int(self.config.actor_rollout_ref.rollout.n)
            extra = list(self.method.extra_rollouts(n))
            default_agent = self.config.actor_rollout_ref.rollout.agent.default_agent_loop
            if any(t is not None for t in extra):
                vote_rows.install_vote_agent_loop(self.config)  # per-row temperatures, registered before workers start
        token_stats.check_installed(token_stats.requested_stats(self.method.step_needs))  # before any worker starts
        super().init_workers()
        manager = self.async_rollout_manager
        generate = manager.generate_sequences
        self._generate_raw = generate  # probe passes generate through verl's own path, without S_y

        def generate_with_supervision(prompts: DataProto) -> DataProto:
            if prompts.meta_info.get("validate", False):
                return generate(prompts)  # validation batches are never touched
            if self.pre_rollout_filter is None:
                out = supervised(prompts)
            else:
                out = self._generate_filtered(prompts, supervised)
            if self.composes_steps:
                dynamic.widen_reward_columns(out)
            return out

        def supervised(prompts: DataProto) -> DataProto:
            train, step_prompts = None, prompts
            if extra:  # one call generates the N = n + len(extra) rollouts per prompt; M = n of them train
                had_agent = vote_rows.AGENT_KEY in prompts.non_tensor_batch
                prompts, train = vote_rows.expand_for_votes(prompts, n, extra, default_agent)
            t0 = time.perf_counter()
            outputs = generate(prompts)
            self._generation_s += time.perf_counter() - t0
            if extra:
                vote_rows.drop_added_columns(outputs, had_agent=had_agent)
            t0 = time.perf_counter()
            votes = self.vote_rollouts(step_prompts, generate)
            if votes is not None:  # more vote-only rows, from another generation (e.g. a teacher's)
                self.rules.metrics["devenus/timing_s/vote_rollouts"] = dt = time.perf_counter() - t0
                self._generation_s += dt
                if train is None:
                    train = np.ones(len(outputs), bool)
                prompts, outputs = surfaces.append_rows(prompts, votes[0]), surfaces.append_rows(outputs, votes[1])
                train = np.concatenate([train, np.zeros(len(votes[1]), bool)])
            self._rollouts_generated += len(outputs)  # training, vote-only and (from refill) refill rows
            with self._timed():
                return self.on_rollouts(prompts, outputs, train_rows=train)

        manager.generate_sequences = generate_with_supervision

    def _generate_filtered(self, prompts: DataProto, supervised) -> DataProto:
        """Generate only the prompts the pre-rollout filter keeps; the skipped ones' rows are placeholders
        (:func:`.sampling.with_placeholders`) that the sampling seam refills."""
        of_row, keys = dynamic.prompt_keys(prompts)
        if self._filter_off:
            skip = np.zeros(len(keys), bool)
        else:
            if self._skip_granule is None:  # kept prompts must split over the agent-loop workers, as refill rounds do
                self._skip_granule = dynamic.refill_granule(self.config, self.method)
            skip = np.asarray(self.pre_rollout_filter.decide(keys, self.global_steps, self._skip_granule), bool)
            check_kept(self.pre_rollout_filter, len(keys), int((~skip).sum()), self._skip_granule)
        rows = skip[of_row]
        if not rows.any():
            out = supervised(prompts)
            out.non_tensor_batch[sampling.PLACEHOLDER_KEY] = np.zeros(len(out), bool)
            return out
        out = supervised(surfaces.select_rows(prompts, ~rows))
        return dynamic.with_placeholders(prompts, rows, out)

    def vote_rollouts(self, prompts: DataProto, generate) -> tuple[DataProto, DataProto] | None:
        """Vote-only rollouts from a separate generation, as (prompts, outputs) with the uids of
        ``prompts`` (the step's training prompts, ``rollout.n`` rows each). None: no such votes (the
        default); :class:`devenus.adapters.verl.teacher.EMATeacherTrainer` returns its teacher's."""
        return None

    def on_rollouts(self, prompts: DataProto, outputs: DataProto, train_rows: np.ndarray | None = None) -> DataProto:
        """S_y (and, unless they wait for the log-prob pass, S_b/S_r/S_a) on one step's training rollouts.

        With ``train_rows`` (vote-on-N), the rules see every rollout; then one aligned selection keeps the
        training rows of prompts and outputs, as the rules kept them in the view.
        """
        hidden = diagnostics.hidden_answers(prompts.non_tensor_batch.get("simulation"))
        decided = self.rules.targets(self._view(prompts, outputs), train_rows, hidden)
        if decided.train_rows is not None:
            prompts = surfaces.select_rows(prompts, decided.train_rows)
            outputs = surfaces.select_rows(outputs, decided.train_rows)
        view = decided.view
        if decided.regraded.any():
            surfaces.place_sequence_scores(outputs.batch["rm_scores"], surfaces.response_mask(outputs), view.score,
                                           rows=decided.regraded)
        outputs.non_tensor_batch[surfaces.TARGET_KEY] = view.target.copy()
        outputs.non_tensor_batch[surfaces.CONSTRUCTED_KEY] = view.constructed.copy()
        if decided.hidden is not None:  # verl moves `simulation` into the generation batch: the log-prob pass reads this
            outputs.non_tensor_batch[surfaces.HIDDEN_KEY] = np.asarray(decided.hidden, dtype=object)
        if not self.rules.after_log_prob:
            self._write_row_decisions(self.rules.row_surfaces(view, decided.hidden), outputs)
        return outputs

    def _write_row_decisions(self, decided: RowDecisions, data: DataProto) -> None:
        """S_r into ``rm_scores`` at each row's last valid token; S_b / S_a as non-tensor columns that
        travel with the rows through verl's balancing until ``_update_actor`` applies them."""
        if decided.reward is not None and decided.reward_rows.any():
            surfaces.place_sequence_scores(data.batch["rm_scores"], surfaces.response_mask(data), decided.reward,
                                           rows=decided.reward_rows)
        if decided.admit is not None:
            data.non_tensor_batch[surfaces.ADMIT_KEY] = decided.admit
        if decided.weight is not None:
            data.non_tensor_batch[surfaces.WEIGHT_KEY] = decided.weight

    # ------------------------------------------------------------------------------ after log-probs
    def _compute_old_log_prob(self, batch: DataProto):
        if not self.composes_steps:
            return self._log_prob_pass(batch)  # no dynamic sampling: the seam costs nothing
        return dynamic.Composer(self, batch, late=self.rules.after_log_prob).run()

    @property
    def composes_steps(self) -> bool:
        """Whether the sampling seam recomposes a step's groups (dynamic sampling, or a pre-rollout filter)."""
        return self.sampling_config.enabled or self.pre_rollout_filter is not None

    def train_label_state(self):
        """(labeled, target, key) of every training row, as ``train_dataset`` indexes them (verl's rows
        after its own filtering: what ``__getitem__`` indexes)."""
        frame = self.train_dataset.dataframe
        return surfaces.label_state(np.asarray(list(frame["extra_info"]), dtype=object),
                                    np.asarray(list(frame["reward_model"]), dtype=object))

    def refill_order(self) -> sampling.RefillOrder:
        """The seeded order refill prompts come from (over the rows ``train_dataset`` indexes)."""
        if self._refill_order is None:
            _, _, keys = self.train_label_state()
            self._refill_order = sampling.RefillOrder(keys, seed=self.sampling_config.seed)
            if self._refill_state is not None:
                self._refill_order.load_state_dict(self._refill_state)
        return self._refill_order

    def _log_prob_pass(self, batch: DataProto):
        """verl's log-prob pass, then (late placement) S_r / S_b / S_a on its statistics."""
        # extra per-token statistics (e.g. self-certainty) from the same forward, only if the method needs them
        with token_stats.collect_extra_stats(self.actor_rollout_wg, self.method) as extra:
            old_log_prob, mfu = super()._compute_old_log_prob(batch)
        if self.rules.after_log_prob:
            with self._timed():
                self._late_surfaces(batch, old_log_prob, extra)
        return old_log_prob, mfu

    def _late_surfaces(self, batch: DataProto, old_log_prob: DataProto, extra: dict | None = None) -> None:
        view = self._view(batch, batch)
        if surfaces.TARGET_KEY in batch.non_tensor_batch:
            view.target = np.asarray(batch.non_tensor_batch[surfaces.TARGET_KEY], dtype=object)
        if surfaces.CONSTRUCTED_KEY in batch.non_tensor_batch:
            view.fields["constructed"] = np.asarray(batch.non_tensor_batch[surfaces.CONSTRUCTED_KEY], bool)
        view.token_stats = {
            "log_probs": old_log_prob.batch["old_log_probs"],
            "entropy": old_log_prob.batch["entropys"],
            "response_mask": surfaces.response_mask(batch),
            **(extra or {}),
        }
        if "self_verification" in self.method.step_needs:
            view.fields["self_verification"] = self._self_verification(batch, view)
        hidden = batch.non_tensor_batch.get(surfaces.HIDDEN_KEY)  # mechanism metrics only
        if hidden is None:
            hidden = diagnostics.hidden_answers(batch.non_tensor_batch.get("simulation"))
        self._write_row_decisions(self.rules.row_surfaces(view, hidden), batch)

    def _self_verification(self, batch: DataProto, view) -> np.ndarray:
        """Per row, the actor's P(yes) verdict on the row's answer (NaN: no answer); one actor pass over
        the step's distinct (question, answer) pairs."""
        from devenus.adapters.verl.self_verification import question_text, verdict_probabilities
        from devenus.signals import distinct_candidates

        template, verdicts = self.method.verification_prompt()
        questions = [question_text(batch.non_tensor_batch, i) for i in range(len(view))]
        pairs, idx = distinct_candidates(questions, self.rules.without_truncated_answers(view).pred)
        t0 = time.perf_counter()
        probs = verdict_probabilities(self, [q for q, _ in pairs], [a for _, a in pairs], template, tuple(verdicts))
        self.rules.metrics["devenus/self_verification/candidates"] = len(pairs)
        self.rules.metrics["devenus/timing_s/self_verification"] = time.perf_counter() - t0
        return np.where(idx >= 0, probs[np.maximum(idx, 0)] if len(probs) else np.nan, np.nan)

    # ------------------------------------------------------------------------------ before update
    def _update_actor(self, batch: DataProto) -> DataProto:
        with self._timed():
            train, metrics, skip = self._prepare_update(batch)
        if skip:
            out = DataProto.from_single_dict(data={}, meta_info={"metrics": metrics})
        else:
            out = super()._update_actor(train)
            out.meta_info["metrics"].update(metrics)
        if self.probe_config.due(self.global_steps):
            # here, not after fit()'s weight sync: the probe's evidence and the method state it changes
            # are then saved by this step's checkpoint, so a resume continues with the same state
            out.meta_info["metrics"].update(self.probe_pass())
        self.collapse_guard_step(batch, out.meta_info["metrics"])  # collapse guard: last, on the complete metrics
        self.budget_step(out.meta_info["metrics"])  # the step's rollouts are counted: stop here if the budget says
        return out

    def _prepare_update(self, batch: DataProto):
        """Admission and advantage weights on a shallow copy of the batch, plus this step's metrics."""
        nt = batch.non_tensor_batch
        labeled, _, _ = surfaces.label_state(nt["extra_info"], nt["reward_model"])
        train = DataProto(batch=batch.batch.copy(), non_tensor_batch=nt, meta_info=batch.meta_info)
        keep = nt.get(surfaces.ADMIT_KEY)
        dropped = surfaces.apply_admission(train, keep) if keep is not None else 0
        if surfaces.WEIGHT_KEY in nt:
            surfaces.scale_advantages(train, nt[surfaces.WEIGHT_KEY])
        reward, advantage, valid = surfaces.row_reward_advantage(train)
        skip, metrics = self.rules.before_update(keep, labeled, reward, advantage, valid, dropped)
        self._write_evidence(metrics)
        metrics["devenus/timing_s/hooks"] = self._hook_s
        metrics[sampling.ROLLOUTS_GENERATED] = self._rollouts_generated
        metrics[sampling.GENERATION_S] = self._generation_s
        if self.pre_rollout_filter is not None:  # its decisions of this step: metrics, and evidence saved now
            metrics.update(self.pre_rollout_filter.pop_metrics())
            self._append_evidence(self.pre_rollout_filter.pop_evidence())
        self._hook_s, self._rollouts_generated, self._generation_s = 0.0, 0, 0.0
        return train, metrics, skip

    # ------------------------------------------------------------------------------ probe passes
    @property
    def overlay(self) -> DevenusConfig:
        """The typed ``devenus`` config: the task runner's (parsed once there), else parsed once from
        ``self.config`` (a bad key fails before any worker, as in devenus.train's check before Ray starts)."""
        if getattr(self, "_overlay", None) is None:
            self._overlay = check_overlay(self.config)
        return self._overlay

    def probe_set(self) -> np.ndarray:
        """Dataset indices of the probe set (:func:`.probe.probe_set` over the training rows' label states)."""
        if self._probe_rows is None:
            labeled, _, _ = self.train_label_state()
            self._probe_rows = probes.probe_set(labeled, self.probe_config)
        return self._probe_rows

    def probe_pass(self) -> dict:
        """One probe pass after this step's update: generation only, evidence tagged ``probe``; returns
        ``probe/*`` metrics (its cost in seconds, of which the weight sync, questions, rollouts)."""
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
        from verl.utils.dataset.rl_dataset import collate_fn

        t0 = time.perf_counter()
        idx = self.probe_set()
        m = {"probe/questions": len(idx), "probe/rollouts": 0}
        if len(idx) == 0:
            print(f"[devenus] probe after step {self.global_steps}: the {self.probe_config.pool} pool is empty")
            m["probe/seconds"] = time.perf_counter() - t0
            return m
        n = self.probe_config.rollouts(self.config.actor_rollout_ref.rollout.n)
        # the rollout replicas sleep after a step's generation and get this update's weights only after
        # the update: sync them now, and put them back to sleep after, as fit() expects to find them
        self.checkpoint_manager.update_weights(self.global_steps)
        sync_s = time.perf_counter() - t0
        rows, hidden = [], {}
        workers = int(self.config.actor_rollout_ref.rollout.agent.get("num_workers", 1) or 1)
        for chunk in probes.chunks(idx, int(self.config.data.train_batch_size)):
            batch = DataProto.from_single_dict(collate_fn([self.train_dataset[int(i)] for i in chunk]))
            batch.non_tensor_batch["uid"] = np.array([f"probe-{self.global_steps}-{int(i)}" for i in chunk], dtype=object)
            gen = self._get_gen_batch(batch).repeat(repeat_times=n, interleave=True)
            gen.meta_info.update({"global_steps": self.global_steps,
                                  "temperature": self.config.actor_rollout_ref.rollout.temperature})
            padded, pad = pad_dataproto_to_divisor(gen, workers)
            out = unpad_dataproto(self._generate_raw(padded), pad_size=pad)
            view = surfaces.rollout_view(gen, out, self.tokenizer, self.global_steps,
                                         decode=self.rules.decode_responses)
            truth = diagnostics.hidden_answers(gen.non_tensor_batch.get("simulation"))
            if truth is not None:
                hidden.update(zip(map(str, view.key), truth))
            rows += probes.probe_evidence(self.method, view)
            m["probe/rollouts"] += len(out)
        t1 = time.perf_counter()
        self.checkpoint_manager.sleep_replicas()
        sync_s += time.perf_counter() - t1
        m.update({f"probe/{self.method.name}/{k}": v for k, v in self.method.pop_metrics().items()})
        acc = probes.majority_accuracy(rows, hidden)
        if acc is not None:
            m["probe/majority_accuracy"] = acc  # majority answer == hidden answer (simulation truth)
        self._append_evidence(rows)
        m["probe/evidence_rows"] = len(rows)
        m["probe/seconds_sync"] = sync_s
        m["probe/seconds"] = time.perf_counter() - t0
        return m

    # ------------------------------------------------------------------------------ evidence
    def _evidence_writer(self):
        if getattr(self, "_evidence", None) is None:
            from devenus.records.evidence import EvidenceWriter, record_dataset

            dv = self.overlay
            folder = dv.evidence_dir or os.path.join(self.config.trainer.default_local_dir, "evidence")
            record_dataset(folder, list(self.config.data.train_files) if not isinstance(self.config.data.train_files, str)
                           else [self.config.data.train_files], dv.round)
            self._evidence = EvidenceWriter(folder, method=self.method.name, round=dv.round)
        return self._evidence

    def _append_evidence(self, rows: list) -> None:
        """Append rows and flush them as one part file now (a kill loses nothing already decided)."""
        if rows:
            w = self._evidence_writer()
            w.extend(rows)
            w.flush()

    def _write_evidence(self, metrics: dict) -> None:
        """The method's evidence rows of this step, appended to the run's evidence table and flushed now
        (one part file per step): a kill loses nothing already decided, and a resumed run's re-run steps
        replace their earlier rows (the reader keeps the later part). Directory: ``devenus.evidence_dir``,
        default ``<trainer.default_local_dir>/evidence``; round: ``devenus.round`` (default 0)."""
        if not self.method.implements("pop_evidence"):
            return
        rows = self.method.pop_evidence()
        metrics.update(self.rules.evidence_metrics(rows))  # proposals judged against simulation truth
        if not rows:
            return
        self._evidence_writer()
        t0 = time.perf_counter()
        self._append_evidence(rows)
        metrics["devenus/evidence/rows"] = len(rows)
        metrics["devenus/timing_s/evidence"] = time.perf_counter() - t0

    # ------------------------------------------------------------------------------ data
    def _create_dataloader(self, train_dataset, val_dataset, collate_fn, train_sampler):
        """verl's dataloaders, with DE-Venus's sampler seam (``data.sampler.class_path`` / pair sampler)."""
        from devenus.adapters.verl.samplers import create_train_sampler

        if train_dataset is not None:
            custom = create_train_sampler(self.config.data, train_dataset, self.method.data_needs)
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
        """DE-Venus's state of this step, then verl's save (its retention, then the resume pointer, last),
        then :func:`.checkpoint.prune_step_state`: the one place DE-Venus's state of the checkpoints verl
        pruned is removed, once per save."""
        root = self.config.trainer.default_local_dir
        folder = os.path.join(root, f"global_step_{self.global_steps}")
        os.makedirs(folder, exist_ok=True)
        self.save_step_state(folder)
        super()._save_checkpoint()
        pruned = ckpt.prune_step_state(root, self.global_steps)
        if pruned:
            names = ", ".join(f"global_step_{s}" for s in pruned)
            print(f"[devenus] pruned DE-Venus's state of {names} (verl's retention removed the actor)")

    def save_step_state(self, folder: str) -> None:
        """DE-Venus's per-step state into ``folder`` (``global_step_N``), each file ``devenus_*`` (what
        :func:`.checkpoint.prune_step_state` removes with the checkpoint); every layer adds its own and calls
        ``super()`` (:class:`.checkpoint.StepStateHooks`: the rules' mixins, the EMA teacher)."""
        payload = {"method": self.method.name, "step": self.global_steps, "state": self.method.state_dict()}
        save_atomically(payload, os.path.join(folder, METHOD_STATE_FILE))
        if self.composes_steps:
            f = self.pre_rollout_filter
            save_atomically({"step": self.global_steps, "refill": self.refill_order().state_dict(),
                             "filter": None if f is None else f.state_dict()},
                            os.path.join(folder, SAMPLING_STATE_FILE))
        super().save_step_state(folder)

    def _load_checkpoint(self):
        result = super()._load_checkpoint()
        if self.global_steps > 0:
            self.load_step_state(self._step_folder())
        return result

    def load_step_state(self, folder: str) -> None:
        """What :meth:`save_step_state` wrote for the step verl resumed at; a state a layer needs and cannot
        find is refused (a resumed run must make the decisions an uninterrupted one would)."""
        path = os.path.join(folder, METHOD_STATE_FILE)
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
        path = os.path.join(folder, SAMPLING_STATE_FILE)
        if os.path.exists(path):  # the cursor is applied when the refill order is first built (the dataset is known then)
            state = torch.load(path, weights_only=False)
            self._refill_state = state["refill"]
            print(f"[devenus] restored the refill cursor from {path}")
            if self.pre_rollout_filter is not None and state.get("filter") is not None:
                self.pre_rollout_filter.load_state_dict(state["filter"])  # replaces the seeded histories
                print(f"[devenus] restored the skip histories from {path}")
        if self.pre_rollout_filter is not None and not os.path.exists(path):
            raise FileNotFoundError(f"resuming at step {self.global_steps} without {path}: the skip rule "
                                    f"cannot make the same decisions without its histories")
        super().load_step_state(folder)


def check_kept(rule, prompts: int, kept: int, granule: int) -> None:
    """A pre-rollout filter's decision must leave a call verl can generate: at least one prompt, and a multiple
    of ``granule`` whenever the call's own prompt count is one (verl splits each call over its agent-loop
    workers and asserts equal chunks, long after the decision); a one-line error naming the filter instead."""
    if kept < 1 or (prompts % granule == 0 and kept % granule):
        raise ValueError(f"{type(rule).__name__}.decide kept {kept} of {prompts} prompts; a generate call needs a "
                         f"non-zero multiple of {granule} (rollout.n rows each, split evenly over "
                         f"actor_rollout_ref.rollout.agent.num_workers): see PreRolloutFilter.decide")
