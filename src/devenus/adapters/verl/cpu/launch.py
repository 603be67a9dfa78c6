"""What a CPU launch of ``python -m verl.trainer.main_ppo`` needs: Hydra overrides and environment,
and the choice between the CPU backend and verl's own (``devenus.backend=auto|cpu|gpu``).

Importing this module does not import verl (it is safe in the driver before verl is configured).
See ``docs/cpu_backend.md`` for what each override is for.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Mapping, Sequence

# the plugin's own test, so the launch and the plugin never disagree about this host (imports neither torch nor verl)
from devenus.adapters.verl.cpu import has_accelerator
from devenus.config.overrides import last_value
from devenus.runs.launch import runtime_env_override
from devenus.verify.config import VERIFY_ENV

PLUGIN_MODULE = "devenus.adapters.verl.cpu.plugin"
BACKENDS = ("auto", "cpu", "gpu")
BACKEND_KEY = "devenus.backend"


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
        # training engine: FSDP2 through the model engine; eager attention, padded batches (remove-padding
        # also runs, exactly: without flash-attn's varlen kernel its mask is dense over the packed micro-batch)
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
        # request ids "det-<sample index>": the hf server seeds each request from it (reproducible runs)
        "actor_rollout_ref.rollout.full_determinism=True",
        # agent-loop workers that build each (stateless) agent loop once, not once per sample (~8 ms each)
        "++actor_rollout_ref.rollout.agent.agent_loop_manager_class="
        "devenus.adapters.verl.cpu.agent_loop.ReusingAgentLoopManager",
        # no dashboard processes (two more Python processes importing aiohttp & co at start-up)
        "++ray_kwargs.ray_init.include_dashboard=False",
        # a CPU run is this host's alone: start its own Ray, never join a cluster someone else started
        # here (ray.init() with no address joins one found in /tmp/ray; `auto` chose cpu because none was given)
        "++ray_kwargs.ray_init.address=local",
    ]


# What a CPU run needs in its environment. Every one is a default: a value the user set wins, except
# where it would contradict the choice of the CPU backend itself (see :func:`cpu_env`).
_ENV_DEFAULTS = {
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",  # verl's engine registry knows FSDP for cuda/npu only; it runs on "cpu"
    "DEVENUS_VERL_CPU": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "RAY_DEDUP_LOGS": "0",
    "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray would start one idle Python worker per declared CPU (16) at start-up; verl's actors each
    # get their own process anyway (their runtime_env differs), so on two cores these only compete.
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    "WANDB_MODE": "disabled",
}
# Values the CPU backend cannot run without: a different user value is a contradiction, not a choice.
_ENV_REQUIRED = {"VERL_PLATFORM": ("cpu",), "DEVENUS_VERL_CPU": ("1", "true", "yes", "on")}


#: the ``PYTHONWARNINGS`` entry that silences verl's "<engine> engine is not available" warnings (one set per
#: process that imports verl: six in a CPU run, 60 lines before the first step); only that module's UserWarnings
ENGINE_WARNINGS_FILTER = "ignore::UserWarning:verl.workers.engine"


def quiet_engine_warnings(env: dict[str, str]) -> dict[str, str]:
    """Append :data:`ENGINE_WARNINGS_FILTER` to ``env["PYTHONWARNINGS"]`` (a user's entries stay, and come
    first). Processes started from ``env`` (Ray's workers inherit the launching process's environment)
    then import verl without the optional engines' warnings; every other warning still shows."""
    entries = [e for e in env.get("PYTHONWARNINGS", "").split(",") if e]
    if ENGINE_WARNINGS_FILTER not in entries:
        entries.append(ENGINE_WARNINGS_FILTER)
    env["PYTHONWARNINGS"] = ",".join(entries)
    return env


class BackendError(ValueError):
    """``devenus.backend`` or the environment asks for something contradictory."""


def cpu_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables for a CPU run, merged over ``base`` (default: nothing) without replacing
    any variable ``base`` already has, so a user's ``WANDB_MODE``, ``OMP_NUM_THREADS`` and the like win.

    ``VERL_USE_EXTERNAL_MODULES`` gets the plugin appended (a list, not a value to replace). Raises
    :class:`BackendError` if ``base`` sets ``VERL_PLATFORM`` or ``DEVENUS_VERL_CPU`` against the CPU
    backend. Ray workers inherit the driver's environment, so setting it in the launching shell is enough.
    """
    env = dict(base or {})
    for key, allowed in _ENV_REQUIRED.items():
        have = env.get(key)
        if have is not None and have.strip().lower() not in allowed:
            raise BackendError(f"the CPU backend was chosen, but the environment sets {key}={have} "
                               f"(it needs {key}={allowed[0]}); unset it or choose {BACKEND_KEY}=gpu")
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    if PLUGIN_MODULE not in modules:
        modules.append(PLUGIN_MODULE)
    env["VERL_USE_EXTERNAL_MODULES"] = ",".join(modules)
    for key, value in _ENV_DEFAULTS.items():
        env.setdefault(key, value)
    return env


def cpu_launch_env() -> dict[str, str]:
    """``os.environ`` plus :func:`cpu_env`, ready for ``subprocess.run(..., env=...)``."""
    return cpu_env(dict(os.environ))


# ------------------------------------------------------------------------------------ the backend
@dataclass(frozen=True)
class BackendChoice:
    backend: str  # "cpu" or "gpu"
    requested: str  # "auto", "cpu" or "gpu"
    reason: str

    def message(self) -> str:
        how = "auto" if self.requested == "auto" else f"{BACKEND_KEY}={self.requested}"
        other = "gpu" if self.backend == "cpu" else "cpu"
        return (f"devenus.train: backend {self.backend} ({how}: {self.reason}); "
                f"{BACKEND_KEY}={other} chooses the other one")


def requested_backend(argv: Sequence[str]) -> str:
    """The value of the last ``devenus.backend=`` override in ``argv`` (Hydra's rule), else ``auto``."""
    value = str(last_value(argv, BACKEND_KEY, "auto")).lower()
    if value not in BACKENDS:
        raise BackendError(f"{BACKEND_KEY} must be one of {', '.join(BACKENDS)}; got {value!r}")
    return value


def _override(argv: Sequence[str], key: str) -> str | None:
    found = last_value(argv, key)
    return None if found is None else str(found)


def _cluster_hint(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why the job may run somewhere other than this host (then this host's devices say nothing)."""
    if env.get("RAY_ADDRESS"):
        return f"RAY_ADDRESS={env['RAY_ADDRESS']} is set"
    address = _override(argv, "ray_kwargs.ray_init.address")
    if address and address.lower() not in ("null", "none", "local"):
        return f"ray_kwargs.ray_init.address={address} is given"
    nnodes = _override(argv, "trainer.nnodes")
    if nnodes and nnodes.isdigit() and int(nnodes) > 1:
        return f"trainer.nnodes={nnodes}"
    return None


def choose_backend(argv: Sequence[str], env: Mapping[str, str] | None = None,
                   accelerator: bool | None = None) -> BackendChoice:
    """Decide between the CPU backend and verl's own device handling for a launch with ``argv``.

    ``cpu``/``gpu`` are taken as given. ``auto`` picks ``gpu`` when torch sees an accelerator here,
    when ``trainer.device`` names one, or when the job is bound for a Ray cluster (``RAY_ADDRESS``,
    ``ray_kwargs.ray_init.address``, ``trainer.nnodes>1``): a head node without CUDA says nothing about
    the workers. Otherwise (nothing but this host's CPU in sight) it picks ``cpu``.
    ``DEVENUS_VERL_CPU`` (the plugin's own switch), when set, is honoured by ``auto`` and must not
    contradict an explicit choice. ``gpu``, however chosen, is refused (:class:`BackendError`) where this
    host has no accelerator and no cluster is given: verl would start Ray and fail in its workers.
    ``accelerator`` stands for this host's answer (None: ask torch, only when the decision needs it).
    """
    env = os.environ if env is None else env
    requested = requested_backend(argv)
    switch = env.get("DEVENUS_VERL_CPU", "").strip().lower()
    forced = "cpu" if switch in ("1", "true", "yes", "on") else "gpu" if switch in ("0", "false", "no", "off") else None
    hint = _cluster_hint(argv, env)
    device = _override(argv, "trainer.device")
    sees = (lambda: has_accelerator() if accelerator is None else accelerator)  # noqa: E731
    if requested != "auto":
        if forced is not None and forced != requested:
            raise BackendError(f"{BACKEND_KEY}={requested} contradicts DEVENUS_VERL_CPU={env['DEVENUS_VERL_CPU']} "
                               f"in the environment; unset one of them")
        choice = BackendChoice(requested, requested, "as asked")
    elif forced is not None:
        choice = BackendChoice(forced, "auto", f"DEVENUS_VERL_CPU={env['DEVENUS_VERL_CPU']} in the environment")
    elif device and device.lower() not in ("cpu", "auto"):
        choice = BackendChoice("gpu", "auto", f"trainer.device={device} is given")
    elif hint:
        return BackendChoice("gpu", "auto", f"{hint}: the job runs on a Ray cluster, whose devices this host cannot see")
    elif sees():
        return BackendChoice("gpu", "auto", "torch sees an accelerator on this host")
    else:
        return BackendChoice("cpu", "auto", "no accelerator visible to torch on this host and no Ray cluster given")
    if choice.backend == "gpu" and hint is None and not sees():
        why = f"{BACKEND_KEY}=gpu" if requested == "gpu" else f"auto: {choice.reason}"
        raise BackendError(f"backend gpu ({why}), but torch sees no accelerator on this host (a CPU build of torch, "
                           f"or a driver too old for its CUDA build) and no Ray cluster is given (RAY_ADDRESS, "
                           f"ray_kwargs.ray_init.address, trainer.nnodes>1): launch where the GPUs are, or choose "
                           f"{BACKEND_KEY}=cpu")
    return choice


def requested_ranks(argv: Sequence[str]) -> int:
    """FSDP ranks a CPU launch asks for: the last ``trainer.n_gpus_per_node`` in ``argv`` (default 1).

    The CPU backend advertises one fake Ray GPU per rank (``ray_init.num_gpus``); were it left at 1 while
    the user asks for 2 ranks, verl's resource check would refuse the pool after Ray had started."""
    value = _override(argv, "trainer.n_gpus_per_node")
    if value is None:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise BackendError(f"trainer.n_gpus_per_node must be a positive integer (FSDP ranks on the CPU backend); "
                           f"got {value!r}")
    return int(value)


def setup_backend(argv: Sequence[str]) -> tuple[list[str], BackendChoice]:
    """Apply the chosen backend to this process: for ``cpu``, the CPU environment (defaults only) is
    merged into ``os.environ`` and the CPU overrides go in front of ``argv`` (so the user's win); for
    ``gpu``, ``DEVENUS_VERL_CPU=0`` keeps the plugin off on a launch host without CUDA, and it and the rest
    of :data:`WORKER_ENV` go to every node in the job's runtime env (in front of ``argv``: a user's override
    of the same variable wins). Returns the new argv and the choice (print ``choice.message()``)."""
    choice = choose_backend(argv)
    quiet_engine_warnings(os.environ)  # for the processes started from here (Ray's workers)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"verl\.workers\.engine\Z")  # and this one
    if choice.backend == "cpu":
        os.environ.update(cpu_env(os.environ))
        # the training loop in this process rather than in a Ray actor of its own (one process fewer to
        # start; devenus.train's key, so not among cpu_overrides, which verl's own main_ppo also takes)
        return cpu_overrides(n_ranks=requested_ranks(argv)) + ["devenus.task_runner=driver"] + list(argv), choice
    os.environ.setdefault("DEVENUS_VERL_CPU", "0")
    return worker_env_overrides(os.environ) + list(argv), choice


#: what every Ray process of a GPU run must see as the launch host does: the plugin's switch and how verl
#: loads plugins (else a GPU-less head node's task runner turns the CPU backend on), the verifier's bounds (the
#: reward workers' verdicts). Workers of a ``ray start`` cluster inherit the environment of ``ray start``,
#: not the launching shell's, so these travel in the job's runtime env (:func:`worker_env_overrides`).
WORKER_ENV = ("DEVENUS_VERL_CPU", "VERL_PLATFORM", "VERL_USE_EXTERNAL_MODULES", "VERL_USE_EXTERNAL_PLUGINS",
              *VERIFY_ENV)

def worker_env_overrides(env: Mapping[str, str]) -> list[str]:
    """:func:`runtime_env_override` for each :data:`WORKER_ENV` variable set in ``env``."""
    return [runtime_env_override(k, env[k]) for k in WORKER_ENV if env.get(k) is not None]
