"""What a CPU launch of ``python -m verl.trainer.main_ppo`` needs: Hydra overrides and environment.

Importing this module does not import verl (it is safe in the driver before verl is configured).
See ``docs/cpu_backend.md`` for what each override is for.
"""

from __future__ import annotations

import os

PLUGIN_MODULE = "devenus.adapters.verl.cpu.plugin"


def has_accelerator() -> bool:
    """``torch.cuda.is_available()`` (CUDA or ROCm builds)."""
    import torch

    return bool(torch.cuda.is_available())


def cpu_overrides(num_cpus: int = 16, n_ranks: int = 1) -> list[str]:
    """Hydra overrides for verl 0.9.1's legacy trainer on a CPU with the ``hf`` rollout.

    Args:
        num_cpus: CPUs Ray is told it has. verl's placement group asks for 3 CPUs per bundle and the
            agent/reward loop workers ask for their own; this is a scheduling budget, not threads.
        n_ranks: FSDP ranks (processes, gloo). Each is one fake Ray GPU and gets its own hf rollout
            replica. 1 is the tested default; more ranks only add processes on a 1-2 core machine.
    """
    n_ranks = int(n_ranks)
    return [
        # legacy DataProto trainer (RayPPOTrainer); the V1 trainer needs TransferQueue
        "trainer.use_v1=False",
        # the platform: no accelerator, one fake Ray GPU per rank
        "trainer.device=cpu",
        f"trainer.n_gpus_per_node={n_ranks}",
        "trainer.nnodes=1",
        f"++ray_kwargs.ray_init.num_gpus={n_ranks}",
        f"ray_kwargs.ray_init.num_cpus={int(num_cpus)}",
        # rollout: the hf backend, one replica, one worker process for agent and reward loops
        "actor_rollout_ref.rollout.name=hf",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        # training engine: FSDP2 through the model engine; eager attention, padded batches
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.ref.strategy=fsdp2",
        "+actor_rollout_ref.model.override_config.attn_implementation=eager",
        "actor_rollout_ref.model.use_remove_padding=False",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        # torch.compile of the entropy kernel costs tens of seconds per process on a CPU
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False",
        # no dataloader worker processes (they would copy the dataset and compete for the core)
        "data.dataloader_num_workers=0",
    ]


def cpu_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables for a CPU run (merged over ``base`` if given, else over nothing).

    ``VERL_USE_EXTERNAL_MODULES`` makes every process that imports verl load the plugin; Ray workers
    inherit the driver's environment, so setting it in the launching shell is enough.
    """
    env = dict(base or {})
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if PLUGIN_MODULE not in modules:
        modules.append(PLUGIN_MODULE)
    env.update(
        {
            "VERL_USE_EXTERNAL_MODULES": ",".join(modules),
            "VERL_PLATFORM": "cpu",
            "VERL_ENGINE_DEVICE": "cuda",
            "DEVENUS_VERL_CPU": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "RAY_DEDUP_LOGS": "0",
            "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
            "RAY_USAGE_STATS_ENABLED": "0",
            "WANDB_MODE": "disabled",
        }
    )
    return env


def cpu_launch_env() -> dict[str, str]:
    """``os.environ`` plus :func:`cpu_env`, ready for ``subprocess.run(..., env=...)``."""
    return cpu_env(dict(os.environ))
