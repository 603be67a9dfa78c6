"""Every private verl member DE-Venus touches, in one place, checked when the trainer is imported.

verl is pinned (``verl==0.9.1``); its private members may change in any release. A verl upgrade must
fail here, once, with the member's name, who uses it and the pinned version, not deep inside a
training step. Public API (``RayPPOTrainer.fit``, registries' ``register``, DataProto) is not listed.

Kinds: ``member`` (an attribute of a module or class, resolved with getattr), ``instance`` (an
attribute verl's own methods set on instances: checked in the class's source), ``source`` (a verl
function whose body DE-Venus mirrors: its source fingerprint, so a change is reviewed, not inherited
silently), ``text`` (a dict key or statement verl's code must still contain: ``member`` is the literal,
looked for in the source of ``owner`` or of its method ``within``).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from dataclasses import dataclass

PINNED = "0.9.1"


@dataclass(frozen=True)
class Seam:
    owner: str  # "module" or "module:Class"
    member: str
    kind: str  # member | instance | source | text
    used_by: str
    fingerprint: str = ""  # kind "source": sha256 prefix of the pinned release's source
    within: str = ""  # kind "text": the owner's method whose source holds the literal


SEAMS: tuple[Seam, ...] = (
    # the trainer's seams (docs/trainer.md): overridden, called through super()
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_compute_old_log_prob", "member",
         "trainer.DeVenusTrainer (late surfaces), self_verification (verdict pass)"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_update_actor", "member",
         "trainer.DeVenusTrainer (admission, weights, metrics), teacher.EMATeacherTrainer (EMA update), "
         "collapse.CollapseGuardMixin (the guard, last)"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_create_dataloader", "member",
         "trainer.DeVenusTrainer (the sampler seam)"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_save_checkpoint", "member",
         "trainer.DeVenusTrainer (every layer's state through the save_step_state chain: the method, the "
         "budget's count, the guard, the EMA teacher's shards; the pruning), collapse.CollapseGuardMixin (held "
         "retention)"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_load_checkpoint", "member",
         "trainer.DeVenusTrainer (resume: the load_step_state chain of every layer)"),
    # checkpoint hygiene (checkpoint.retention_held, prune_step_state): verl reads its retention keys at
    # each save, its checkpoint manager removes only the actor folder, and the resume pointer is its last write
    *(Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", f'self.config.trainer.get("{key}", {default})', "text",
           "checkpoint.retention_held (sets the key to None for one save)", within="_save_checkpoint")
      for key, default in (("max_actor_ckpt_to_keep", "None"), ("max_critic_ckpt_to_keep", "None"),
                           ("remove_previous_ckpt_in_save", "False"))),
    Seam("verl.utils.checkpoint.checkpoint_manager:BaseCheckpointManager", "shutil.rmtree(abs_path", "text",
         "checkpoint.prune_step_state (verl removes the saved actor path only)", within="remove_previous_save_local_path"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", 'local_latest_checkpointed_iteration = os.path.join(', "text",
         "trainer.DeVenusTrainer._save_checkpoint (DE-Venus's state is written before verl's save, whose pointer "
         "commits it)", within="_save_checkpoint"),
    # probe passes (trainer.DeVenusTrainer.probe_pass): verl's own generation path outside fit()'s rollout
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_get_gen_batch", "member",
         "trainer.DeVenusTrainer.probe_pass, sampling.Composer (generation batches, as fit() builds them)"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "checkpoint_manager", "instance",
         "trainer.DeVenusTrainer.probe_pass, sampling.Composer (wakes the rollout with the weights, sleeps it again)"),
    Seam("verl.utils.dataset.rl_dataset:RLHFDataset", "dataframe", "instance",
         "trainer.DeVenusTrainer.probe_set, refill_order (the rows __getitem__ indexes, after verl's filtering)"),
    # dynamic sampling (sampling.Composer): rows replaced in place inside _compute_old_log_prob stay what
    # fit() trains on because fit's reward IS rm_scores and its extra reward arrays ARE the batch's arrays,
    # and fit() sleeps the replicas right after generation (a refill wakes them with update_weights)
    Seam("verl.trainer.ppo.reward", 'reward_tensor = batch.batch["rm_scores"]', "text",
         "sampling.Composer (replaces rows of the tensor fit() holds as its reward)", within="extract_reward"),
    Seam("verl.trainer.ppo.reward", "{key: batch.non_tensor_batch[key] for key in reward_extra_keys}", "text",
         "sampling.Composer (the reward's extra arrays alias the batch's arrays)", within="extract_reward"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "self.checkpoint_manager.sleep_replicas()", "text",
         "sampling.Composer (replicas sleep after the step's generation: refill wakes them)", within="fit"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "self._compute_old_log_prob(batch)", "text",
         "sampling.Composer (the seam: called once per step, on fit's batch, after the reward)", within="fit"),
    # refill within verl's memory protocol (sampling.Composer.wake / sleep): verl wakes the replicas only through
    # update_weights, whose colocated sync resumes their weights and KV cache and loads the actor's weights (each
    # wake after a sleep is one weight sync: devenus/sampling/extra_weight_syncs); fit() sleeps them before its
    # log-prob pass (the sleep_replicas text above; tests/adapters/verl/test_sampling_protocol.py reads the order)
    *(Seam("verl.workers.engine_workers:ActorRolloutRefWorker", f'await self.rollout.resume(tags=["{tag}"])', "text",
           f"sampling.Composer.wake (update_weights resumes the slept replicas' {tag} around the weight sync)",
           within="update_weights") for tag in ("weights", "kv_cache")),
    # the engine extension (token statistics from the actor's forward)
    Seam("verl.workers.engine.base:EngineRegistry", "_engines", "member",
         "token_stats.install (swaps the FSDP LM engine for its subclass; register() refuses overwrites)"),
    Seam("verl.workers.engine.fsdp.transformer_impl:FSDPEngineWithLMHead", "_gather_and_unpad_packed", "member",
         "token_stats.TokenStatsFSDPEngine (unpads self-certainty like verl's log-probs)"),
    Seam("verl.workers.engine.fsdp.transformer_impl:FSDPEngine", "use_ulysses_sp", "instance",
         "token_stats.TokenStatsFSDPEngine (hidden_pooled refuses Ulysses sequence parallelism)"),
    # the GPU path's instance attributes and dict keys (token_stats, teacher, trainer): what verl's own
    # code sets, read by DE-Venus on the actor worker, its engine, the trainer and the worker group
    Seam("verl.workers.engine_workers:ActorRolloutRefWorker", "actor", "instance",
         "teacher.TeacherWorker._actor_shards (self.actor.engine.module)"),
    Seam("verl.workers.engine_workers:TrainingWorker", "engine", "instance",
         "teacher.TeacherWorker._actor_shards (self.actor.engine.module)"),
    Seam("verl.workers.engine.fsdp.transformer_impl:FSDPEngine", "module", "instance",
         "teacher.TeacherWorker._actor_shards (the FSDP-wrapped model's parameter shards)"),
    Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "async_rollout_manager", "instance",
         "trainer.DeVenusTrainer.init_workers (wraps generate_sequences), collapse.CollapseGuardMixin (stops "
         "the step after it acted), probe (probe passes)"),
    Seam("verl.single_controller.base.worker_group:WorkerGroup", "setattr(self, method_name, func)", "text",
         "token_stats (patches compute_log_prob bound on the worker-group instance)", within="_bind_worker_method"),
    *(Seam("verl.workers.engine.fsdp.transformer_impl:FSDPEngineWithLMHead", f'"{key}"', "text",
           "token_stats.TokenStatsFSDPEngine._self_certainty (reads output_args)", within="prepare_model_inputs")
      for key in ("temperature_is_one", "temperature_rmpad", "pad_size", "temperature")),
    *(Seam("verl.workers.engine.fsdp.transformer_impl:FSDPEngineWithLMHead", f'key="{key}"', "text",
           "token_stats.TokenStatsFSDPEngine._self_certainty (reads the micro-batch's flags)",
           within="prepare_model_outputs")
      for key in ("use_remove_padding", "use_fused_kernels")),
    # the CPU backend
    Seam("verl.workers.rollout.base", "_ROLLOUT_REGISTRY", "member",
         "cpu.register_rollout (the worker-side hf rollout adapter)"),
    Seam("verl.plugin.platform.platform_manager", "_current_platform", "member",
         "cpu.platform.activate_platform (replaces an already-resolved platform)"),
    Seam("verl.workers.rollout.replica:RolloutReplica", "_server_handle", "instance",
         "cpu.hf_rollout.HFRolloutReplica (launches its own server)"),
    Seam("verl.workers.rollout.replica:RolloutReplica", "_server_address", "instance",
         "cpu.hf_rollout.HFRolloutReplica (launches its own server)"),
    # the CPU backend's agent-loop workers (cpu.agent_loop): verl's per-sample body, minus the per-sample build
    Seam("verl.experimental.agent_loop.agent_loop:AgentLoopWorker", "_run_agent_loop", "source",
         "cpu.agent_loop.ReusingAgentLoopWorker (mirrors it around one agent-loop object per name)",
         fingerprint="32c3d607c5d4c9fa"),
    Seam("verl.experimental.agent_loop.agent_loop:AgentLoopWorker", "_agent_loop_postprocess", "member",
         "cpu.agent_loop.ReusingAgentLoopWorker"),
    Seam("verl.experimental.agent_loop.agent_loop", "_agent_loop_registry", "member",
         "cpu.agent_loop.ReusingAgentLoopWorker (which loop an agent name builds)"),
    Seam("verl.experimental.agent_loop.agent_loop:AgentLoopManager", "agent_loop_workers_class", "instance",
         "cpu.agent_loop.ReusingAgentLoopManager (sets its worker class before verl's constructor)"),
    # a body DE-Venus mirrors: task_runner.DeVenusTaskRunnerImpl.run follows it line for line
    Seam("verl.trainer.main_ppo_v0:TaskRunner", "run", "source",
         "task_runner.DeVenusTaskRunnerImpl.run (review it against verl's when this fingerprint changes)",
         fingerprint="95ebfb4a9286d46a"),
    # the calls run_ppo makes on its task_runner_class (.options(...).remote(), .remote(), run.remote(config))
    Seam("verl.trainer.main_ppo", "run_ppo", "source",
         "task_runner.InDriverTaskRunner (answers those calls in the driver; review it when this changes)",
         fingerprint="a65eddb189e56ae1"),
)


class VerlSeamError(ImportError):
    """The installed verl lacks (or changed) a private member DE-Venus relies on."""


def _resolve(owner: str):
    module, _, cls = owner.partition(":")
    obj = importlib.import_module(module)
    if cls:
        obj = getattr(obj, cls)
        obj = getattr(obj, "__ray_actor_class__", obj)  # a @ray.remote class: the class it wraps
    return obj


def problem(seam: Seam) -> str | None:
    """What is wrong with one seam in the installed verl (None: it holds)."""
    try:
        obj = _resolve(seam.owner)
    except (ImportError, AttributeError) as e:
        return f"{seam.owner} cannot be imported ({e})"
    if seam.kind == "member":
        return None if hasattr(obj, seam.member) else f"{seam.owner}.{seam.member} is missing"
    if seam.kind == "text":
        src = inspect.getsource(getattr(obj, seam.within) if seam.within else obj)
        where = f"{seam.owner}.{seam.within}" if seam.within else seam.owner
        return None if seam.member in src else f"{where} no longer contains {seam.member}"
    src = inspect.getsource(obj if seam.kind == "instance" else getattr(obj, seam.member, None) or obj)
    if seam.kind == "instance":
        return None if f"self.{seam.member}" in src else f"{seam.owner} no longer sets self.{seam.member}"
    if seam.kind == "source":
        got = hashlib.sha256(src.encode()).hexdigest()[:16]
        return None if got == seam.fingerprint else (
            f"{seam.owner}.{seam.member} changed (source fingerprint {got}, pinned {seam.fingerprint})")
    raise ValueError(f"unknown seam kind {seam.kind!r}")


def check(seams: tuple[Seam, ...] = SEAMS) -> None:
    """Raise :class:`VerlSeamError` listing every seam the installed verl breaks."""
    import verl

    bad = [(s, p) for s in seams if (p := problem(s)) is not None]
    if bad:
        lines = "\n".join(f"  - {p}; used by {s.used_by}" for s, p in bad)
        raise VerlSeamError(f"DE-Venus is built on verl=={PINNED}, but the installed verl "
                            f"{getattr(verl, '__version__', '?')} breaks {len(bad)} of the private members it "
                            f"relies on:\n{lines}\nInstall verl=={PINNED} (requirements/lock.txt), or port these seams "
                            f"(src/devenus/adapters/verl/seams.py lists them all).")
