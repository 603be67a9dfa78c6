"""Dynamic sampling with refill on verl's legacy trainer: the adapter half of :mod:`devenus.online.sampling.dynamic_sampling`.

Runs inside ``DeVenusTrainer._compute_old_log_prob`` (:func:`compose_step`), where fit()'s ``batch`` already
holds the step's rewards: ``reward_tensor`` IS ``batch.batch["rm_scores"]`` and the reward's extra arrays ARE
``batch.non_tensor_batch`` arrays (verl's ``extract_reward``). Empty slots are filled by writing refill rows
INTO those tensors and arrays (``t[rows] = new``), so every alias fit() holds sees the composed batch and the
row count never changes (dp divisibility and mini-batches untouched). Early-placement methods are judged on
``rm_scores`` and refilled before the log-prob pass; late-placement ones get the pass and their late surfaces
first, refill groups get theirs, and the rows of ``old_log_prob`` are replaced alike.

Memory protocol: verl's step is generate (replicas awake) -> ``sleep_replicas`` -> log-prob pass -> update
-> ``update_weights`` (which is verl's wake: it resumes the replicas' memory and syncs the weights). A
refill round follows it: :meth:`Composer.wake` before its generation, :meth:`Composer.sleep` before its
log-prob pass (late placement), so no log-prob pass ever runs beside awake replicas.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import torch
from verl import DataProto

from devenus.adapters.verl import surfaces
from devenus.online.sampling import dynamic_sampling as rule
from devenus.online.rollouts import RolloutBatch


def score_view(data: DataProto, step: int) -> RolloutBatch:
    """The rows' final sequence scores (sum of ``rm_scores``), uids, keys and label states: all the
    group rule reads (no decoding)."""
    nt = data.non_tensor_batch
    n = len(data)
    labeled, target, key = surfaces.label_state(nt["extra_info"], nt["reward_model"])
    score = data.batch["rm_scores"].sum(dim=1).cpu().numpy().astype(np.float64)
    fields = {}
    if rule.PLACEHOLDER_KEY in nt:
        fields[rule.PLACEHOLDER_KEY] = np.asarray(nt[rule.PLACEHOLDER_KEY], bool)
    return RolloutBatch(uid=np.asarray(nt["uid"], dtype=object), key=key, labeled=labeled, target=target,
                        pred=[None] * n, score=score, response_length=np.zeros(n, np.int64),
                        truncated=np.zeros(n, bool), step=step, fields=fields)


def widen_reward_columns(outputs: DataProto) -> None:
    """The reward's fixed-width string arrays (``pred`` as ``<U5``) as object arrays, at generation: fit()
    holds them by reference and writes them back after the update, so a refill row's longer string must fit
    in place, never in a new array fit() would overwrite with the stale one."""
    for k in outputs.meta_info.get("reward_extra_keys", []) or []:
        a = outputs.non_tensor_batch.get(k)
        if isinstance(a, np.ndarray) and a.dtype.kind in "US":
            outputs.non_tensor_batch[k] = a.astype(object)


def replace_rows(dst: DataProto, rows: np.ndarray, src: DataProto, src_rows: np.ndarray,
                 keep_alias: frozenset = frozenset()) -> None:
    """``dst``'s rows ``rows`` become ``src``'s rows ``src_rows``, in place in every tensor and array.

    A fixed-width string array too narrow for the new values is widened (a new array); for a key in
    ``keep_alias`` (one fit() holds a reference to) that is an error instead of a silent break of the alias."""
    if sorted(dst.batch.keys()) != sorted(src.batch.keys()) or sorted(dst.non_tensor_batch) != sorted(src.non_tensor_batch):
        raise ValueError(f"refill rows have other columns than the step's batch: tensors {sorted(src.batch.keys())} vs "
                         f"{sorted(dst.batch.keys())}, arrays {sorted(src.non_tensor_batch)} vs {sorted(dst.non_tensor_batch)}")
    rows, src_rows = np.asarray(rows, np.int64), np.asarray(src_rows, np.int64)
    rt, st = torch.as_tensor(rows), torch.as_tensor(src_rows)
    for k in dst.batch.keys():
        t, s = dst.batch[k], src.batch[k]
        if t.shape[1:] != s.shape[1:]:
            raise ValueError(f"refill rows of {k!r} have shape {tuple(s.shape[1:])}, the step's {tuple(t.shape[1:])}")
        t[rt.to(t.device)] = s[st.to(s.device)].to(device=t.device, dtype=t.dtype)
    for k, a in list(dst.non_tensor_batch.items()):
        v = np.asarray(src.non_tensor_batch[k])[src_rows]
        fits = a.dtype == object or (np.can_cast(v.dtype, a.dtype, "same_kind")
                                     and (a.dtype.kind not in "US" or v.dtype.itemsize <= a.dtype.itemsize))
        if fits:
            a[rows] = v
        elif k in keep_alias:
            raise ValueError(f"refill rows of reward column {k!r} ({v.dtype}) do not fit the step's array ({a.dtype})")
        else:
            wide = a.astype(np.result_type(a.dtype, v.dtype))
            wide[rows] = v
            dst.non_tensor_batch[k] = wide


#: the per-row decision columns S_b / S_a write only when they decide something, with their neutral value
DECISION_DEFAULTS = {surfaces.ADMIT_KEY: True, surfaces.WEIGHT_KEY: 1.0}


def align_decisions(a: DataProto, b: DataProto) -> None:
    """A decision column one side has and the other lacks (the method decided nothing on that generation)
    gets its neutral value on the other side, so rows can move between them."""
    for k, neutral in DECISION_DEFAULTS.items():
        for x, y in ((a, b), (b, a)):
            if k in x.non_tensor_batch and k not in y.non_tensor_batch:
                y.non_tensor_batch[k] = np.full(len(y), neutral, dtype=np.asarray(x.non_tensor_batch[k]).dtype)


def with_placeholders(prompts: DataProto, skipped_rows: np.ndarray, generated: DataProto) -> DataProto:
    """The step's outputs in ``prompts``' row order: generated rows where generated, and for each skipped
    row a copy of a generated row carrying the skipped prompt's own input arrays (so fit()'s union with
    its batch holds), marked in :data:`PLACEHOLDER_KEY`."""
    skipped_rows = np.asarray(skipped_rows, bool)
    gen_idx, skip_idx = np.flatnonzero(~skipped_rows), np.flatnonzero(skipped_rows)
    copies = surfaces.select_rows(generated, np.arange(len(skip_idx)) % len(generated))
    for k, v in prompts.non_tensor_batch.items():
        if k in copies.non_tensor_batch:
            copies.non_tensor_batch[k] = np.asarray(v)[skip_idx].copy()
    generated.non_tensor_batch[rule.PLACEHOLDER_KEY] = np.zeros(len(generated), bool)
    copies.non_tensor_batch[rule.PLACEHOLDER_KEY] = np.ones(len(copies), bool)
    both = surfaces.append_rows(generated, copies)
    return surfaces.select_rows(both, np.argsort(np.concatenate([gen_idx, skip_idx]), kind="stable"))


def prompt_keys(prompts: DataProto) -> tuple[np.ndarray, list[str]]:
    """(per row, the position of its prompt; per prompt, its key) of a repeated generation batch."""
    uid = np.asarray(prompts.non_tensor_batch["uid"], dtype=object)
    pos: dict[str, int] = {}
    keys: list[str] = []
    of_row = np.empty(len(uid), np.int64)
    infos = prompts.non_tensor_batch["extra_info"]
    for i, u in enumerate(uid):
        if u not in pos:
            pos[u] = len(keys)
            keys.append(str((infos[i] or {}).get("index")))
        of_row[i] = pos[u]
    return of_row, keys


class Composer:
    """One step's refill loop over the trainer's verl objects (built per step, holds nothing across steps)."""

    def __init__(self, trainer, batch: DataProto, late: bool):
        self.t, self.batch, self.late = trainer, batch, late
        self.cfg = trainer.sampling_config
        self.keep_alias = frozenset(batch.meta_info.get("reward_extra_keys", []) or [])
        self.awake = False  # fit() slept the replicas right after the step's generation
        self.wakes = 0  # weight syncs this step's refill added to verl's one per step

    def wake(self) -> None:
        """Replicas awake for a generation. verl wakes them only through ``update_weights`` (its colocated
        sync resumes the weights' memory, then loads the actor's weights into it: a level-2 vLLM sleep
        discarded them), so every wake after a sleep is one more weight sync. The actor is not updated
        before the step's update, so each sync hands over the weights that generated the step (on-policy)."""
        if not self.awake:
            self.t.checkpoint_manager.update_weights(self.t.global_steps)
            self.awake, self.wakes = True, self.wakes + 1

    def sleep(self) -> None:
        """Replicas asleep (their weights and KV cache freed), as verl has them for every log-prob pass
        and as fit() expects to find them after this seam."""
        if self.awake:
            self.t.checkpoint_manager.sleep_replicas()
            self.awake = False

    def refill_round(self, exclude: set[str], use_filter: bool, k: int):
        """One generation of ``k`` refill prompts through the wrapped generate (S_y, early surfaces), as fit()
        builds its batch; with late placement, their log-prob pass and late surfaces too. None: no prompt left."""
        from verl.trainer.ppo.ray_trainer import compute_response_mask
        from verl.utils.dataset.rl_dataset import collate_fn

        t = self.t
        idx = t.refill_order().take(k, exclude)
        if len(idx) == 0:
            return None, None
        exclude.update(str(t.refill_order().keys[i]) for i in idx)
        self.wake()
        raw = DataProto.from_single_dict(collate_fn([t.train_dataset[int(i)] for i in idx]))
        raw.meta_info["temperature"] = t.config.actor_rollout_ref.rollout.temperature
        raw.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(raw))], dtype=object)
        n = int(t.config.actor_rollout_ref.rollout.n)
        gen = t._get_gen_batch(raw)
        gen.meta_info["global_steps"] = t.global_steps
        gen = gen.repeat(repeat_times=n, interleave=True)
        t._filter_off = not use_filter
        try:
            out = t.async_rollout_manager.generate_sequences(gen)
        finally:
            t._filter_off = False
        # one line per round: what a resumed run must refill alike (tests compare it)
        print(f"[devenus] step {t.global_steps} refill: {len(idx)} prompts "
              f"{','.join(str(t.refill_order().keys[i]) for i in idx)}" + ("" if use_filter else " (unfiltered)"),
              flush=True)
        out.meta_info.pop("timing", None)
        cand = raw.repeat(repeat_times=n, interleave=True).union(out)
        if "response_mask" not in cand.batch.keys():
            cand.batch["response_mask"] = compute_response_mask(cand)
        # what fit() puts in meta_info before its log-prob pass (the engine reads it for its metrics)
        cand.meta_info["global_token_num"] = torch.sum(cand.batch["attention_mask"], dim=-1).tolist()
        cand.meta_info.setdefault("images_seqlens", [])
        if not self.late:
            return cand, None  # replicas stay awake for the next round: no log-prob pass until the step's
        # Late placement: the round is judged on rewards its own log-prob pass writes, so the next round's
        # size and need are known only after it; generating every round first is impossible, and the
        # pass runs as verl's does, replicas asleep. Cost: one weight sync per round (the next wake).
        self.sleep()
        return cand, t._log_prob_pass(cand)[0]

    def replace(self, old: DataProto | None, slots: list[np.ndarray], cand: DataProto, cand_old: DataProto | None,
                groups: rule.Groups, pairs: list[tuple[int, int]]) -> None:
        if not pairs:
            return
        dst = np.concatenate([slots[s] for s, _ in pairs])
        src = np.concatenate([groups.rows[c] for _, c in pairs])
        for s, c in pairs:
            if len(slots[s]) != len(groups.rows[c]):
                raise ValueError(f"refill group of {len(groups.rows[c])} rows for a slot of {len(slots[s])}")
        align_decisions(self.batch, cand)
        replace_rows(self.batch, dst, cand, src, self.keep_alias)
        if old is not None:
            replace_rows(old, dst, cand_old, src)

    def observe(self, groups: rule.Groups) -> None:
        f = self.t.pre_rollout_filter
        if f is not None:
            real = ~groups.placeholder
            f.observe(list(groups.key[real]), groups.zero_variance[real], groups.mean_score[real], self.t.global_steps)

    def size(self, composer: rule.SlotComposer, drawn: int, informative: int, use_filter: bool) -> int:
        """Prompts for the next round: what the open slots need (:func:`rule.refill_size`). With late
        placement each round gets verl's own log-prob pass, whose micro-batches only the step's shape is
        known to fit (a 3-prompt round failed verl's micro-batch divisibility): whole batches, as before."""
        batch = int(self.t.config.data.train_batch_size)
        return rule.refill_size(len(composer.open_slots(use_filter)), drawn, informative, batch,
                                self.cfg.refill_prompts, batch if self.late else refill_granule(self.t.config, self.t.method),
                                variance_filter=use_filter)

    def run(self) -> tuple[DataProto, float]:
        t, batch, cfg = self.t, self.batch, self.cfg
        t0 = time.perf_counter()
        old = mfu = None
        if self.late:
            old, mfu = t._log_prob_pass(batch)
        first = rule.judge(score_view(batch, t.global_steps), cfg.tolerance)
        self.observe(first)
        slots = first.rows
        composer = rule.SlotComposer(first.placeholder, first.zero_variance if cfg.enabled else
                                     np.zeros(len(first), bool))
        exclude = {str(k) for k in first.key}
        refills: list[rule.Groups] = []
        rounds = 0
        # the informative share of the prompts drawn so far (skipped ones included): what sizes each round
        drawn, informative = len(first), int(first.informative.sum())
        try:
            while cfg.enabled and rounds < cfg.max_refill_rounds and not composer.done():
                cand, cand_old = self.refill_round(exclude, True, self.size(composer, drawn, informative, True))
                if cand is None:
                    break
                rounds += 1
                g = rule.judge(score_view(cand, t.global_steps), cfg.tolerance)
                self.observe(g)
                refills.append(g)
                drawn, informative = drawn + len(g), informative + int(g.informative.sum())
                self.replace(old, slots, cand, cand_old, g, composer.offer(g.informative))
            # placeholders left: further prompts, without the skip rule or the variance filter
            for _ in range(4):
                if not composer.placeholders_unfilled:
                    break
                cand, cand_old = self.refill_round(exclude, False, self.size(composer, drawn, informative, False))
                if cand is None:
                    break
                g = rule.judge(score_view(cand, t.global_steps), cfg.tolerance)
                self.observe(g)
                refills.append(g)
                self.replace(old, slots, cand, cand_old, g, composer.offer(~g.placeholder, variance_filter=False))
        finally:
            self.sleep()
        if composer.placeholders_unfilled:
            raise RuntimeError(f"step {t.global_steps}: {composer.placeholders_unfilled} skipped prompts' slots could "
                               f"not be refilled (the training set has no prompt left outside this step)")
        batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
        m = rule.step_metrics(first, refills, composer, rounds, t._rollouts_generated, self.wakes)
        m["devenus/timing_s/sampling"] = time.perf_counter() - t0
        t.rules.metrics.update(m)
        if not self.late:
            old, mfu = t._log_prob_pass(batch)
        return old, mfu


def refill_rollouts(config, method) -> list[int]:
    """Rollouts per prompt of each generate call a refill round makes (training rollouts, vote-on-N, teacher votes)."""
    n = int(config.actor_rollout_ref.rollout.n)
    return [n] + ([n + len(list(method.extra_rollouts(n)))] if method.implements("extra_rollouts") else []) \
        + ([method.teacher_rollouts(n)] if "teacher" in method.step_needs else [])


def refill_granule(config, method) -> int:
    """The fewest refill prompts whose rollouts every generate call splits evenly over the agent-loop workers."""
    return rule.refill_granule(int(config.actor_rollout_ref.rollout.agent.get("num_workers", 1) or 1), refill_rollouts(config, method))
