"""DeVenusTaskRunner: assembles verl's execution context once, then builds the method's trainer.

Injected through verl's documented seam ``run_ppo(config, task_runner_class)``; the context (workers,
resource pools, datasets, tokenizer) is the same whatever the method, only the trainer class and the
method object come from WeakTrainerInterface.
"""

from __future__ import annotations

import importlib
import os
from types import SimpleNamespace

import ray
from omegaconf import OmegaConf
from verl.trainer.main_ppo_v0 import BaseTaskRunner

from devenus.adapters.verl.overlay import DevenusConfig, check_overlay
from devenus.online.registry import WeakTrainerInterface


def resolve_trainer_class(path: str):
    from devenus.adapters.verl.trainer import DeVenusTrainer

    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, DeVenusTrainer)):
        raise TypeError(f"trainer {path!r} is not a subclass of DeVenusTrainer")
    return cls


def build_method(overlay: DevenusConfig):
    """The method's registration and object, from the typed ``devenus`` config (:func:`.train.check_overlay`)."""
    for module in overlay.plugins:
        importlib.import_module(module)
    spec = WeakTrainerInterface.get(overlay.method)
    return spec, spec.build(dict(overlay.method_config))


class DeVenusTaskRunnerImpl(BaseTaskRunner):
    """verl's ``TaskRunner.run`` with three differences, marked ``# DE-Venus`` below: the method is built
    from the overlay, the actor role may run a worker subclass (chosen by the trainer class), and the
    trainer class comes from the registry and receives the method.

    Why the body is mirrored rather than inherited: verl's ``run`` names ``RayPPOTrainer`` in its own body
    (the class is not a parameter, and Ray ships the runner by value, so rebinding the module attribute
    does not reach the remote process), and the worker class must be swapped between
    ``add_actor_rollout_worker`` and ``add_ref_policy_worker``. Everything else is verl's own helpers
    (BaseTaskRunner's ``add_*``, ``create_rl_dataset``, ``create_rl_sampler``). ``seams.py`` fingerprints
    verl's ``TaskRunner.run``: a verl release that changes it fails at import until this mirror is reviewed.
    """

    def run(self, config):
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        OmegaConf.resolve(config)
        overlay = check_overlay(config)  # DE-Venus: the typed devenus config, read once for this process
        spec, method = build_method(overlay)  # DE-Venus
        trainer_cls = resolve_trainer_class(spec.trainer)  # DE-Venus

        actor_rollout_cls, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        worker_cls = trainer_cls.actor_rollout_worker_class()  # DE-Venus
        if worker_cls is not None:  # a trainer that extends the actor worker (e.g. the EMA teacher's)
            from verl.trainer.ppo.ray_trainer import Role

            for role in (Role.ActorRollout, Role.ActorRolloutRef):
                if role in self.role_worker_mapping:
                    self.role_worker_mapping[role] = ray.remote(worker_cls)
            actor_rollout_cls = worker_cls
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        self.add_ref_policy_worker(config, actor_rollout_cls)
        validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))

        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        resource_pool_manager = self.init_resource_pool_mgr(config)
        train_dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, processor, is_train=True,
                                          max_samples=config.data.get("train_max_samples", -1))
        val_dataset = create_rl_dataset(config.data.val_files, config.data, tokenizer, processor, is_train=False,
                                        max_samples=config.data.get("val_max_samples", -1))
        trainer = trainer_cls(  # DE-Venus: the registry's trainer class, with the method
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=ray_worker_group_cls,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            collate_fn=collate_fn,
            train_sampler=create_rl_sampler(config.data, train_dataset),
            method=method,
            overlay=overlay,
        )
        print(f"[devenus] method {spec.name} ({type(method).__name__}) with {trainer_cls.__name__}")
        trainer.init_workers()
        trainer.fit()


#: the Ray actor verl's ``run_ppo`` starts (``devenus.task_runner=ray``: verl's own topology)
DeVenusTaskRunner = ray.remote(DeVenusTaskRunnerImpl)


def runtime_env_vars(config) -> dict[str, str]:
    """The environment variables a task-runner actor would get from ``run_ppo``'s ``ray.init``: verl's
    defaults (those not already set) and ``ray_kwargs.ray_init.runtime_env.env_vars``."""
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    env = dict(get_ppo_ray_runtime_env(config).get("env_vars", {}))
    ray_init = config.ray_kwargs.get("ray_init", None) or {}
    extra = (ray_init.get("runtime_env", None) or {}).get("env_vars", None)
    if extra:
        env.update(OmegaConf.to_container(extra, resolve=True) if not isinstance(extra, dict) else extra)
    return {str(k): str(v) for k, v in env.items()}


class InDriverTaskRunner:
    """A ``task_runner_class`` for verl's ``run_ppo`` that runs the task runner in the calling process
    (``devenus.task_runner=driver``) instead of in a Ray actor of its own.

    Why: on the CPU backend that actor is one more process importing torch, transformers and verl
    before any worker starts, while the driver, which has imported all of it already, only waits
    (bench/task_runner_startup.py: 0.86x the wall time and 0.87x the CPU seconds per launch here). ``run_ppo`` still makes its own ``ray.init`` with verl's
    runtime environment; the workers, resource pools and training loop are the same. The variables the
    actor would have received through that runtime environment are set in the driver's environment.
    verl calls ``task_runner_class.remote()`` and then ``ray.get(runner.run.remote(config))``.
    """

    def __init__(self, impl: type = DeVenusTaskRunnerImpl):
        self._impl = impl

    def options(self, **_ignored) -> InDriverTaskRunner:
        return self

    def remote(self) -> SimpleNamespace:
        """The runner, built here, as the handle verl uses: ``ray.get(handle.run.remote(config))``."""
        runner = self._impl()

        def run(config):
            os.environ.update(runtime_env_vars(config))
            return ray.put(runner.run(config))

        return SimpleNamespace(run=SimpleNamespace(remote=run))
