"""A CPU backend for verl 0.9.1, loaded in every process through verl's plugin mechanism.

``import verl`` imports the modules named in ``VERL_USE_EXTERNAL_MODULES`` and every ``verl.plugins``
entry point. Point either at :mod:`devenus.adapters.verl.cpu.plugin`, which calls :func:`register`.
Ray workers inherit the driver's environment, so every Ray process (TaskRunner, FSDP workers, agent
and reward loop workers, the rollout server) loads the backend when it imports verl.

:func:`register` is idempotent and does nothing when an accelerator is present (or when
``DEVENUS_VERL_CPU=0``); ``DEVENUS_VERL_CPU=1`` forces it on. What it installs:

- the ``cpu`` platform (:mod:`.platform`) in verl's ``PlatformRegistry``, selected via ``VERL_PLATFORM``;
- ``VERL_ENGINE_DEVICE=cuda``, so verl's engine registry hands out its FSDP engine on a CPU;
- the ``hf`` rollout (:mod:`.hf_rollout`);
- the torch shims (:mod:`.shims`) and one torch thread per process;
- exact, vectorised versions of two verl functions that loop in Python where a GPU run has a kernel:
  ``process_validation_metrics`` (:mod:`.val_metrics`; verl's takes a minute per testbed validation)
  and ``logprobs_from_logits_v2`` (:mod:`.logprobs`; verl's loops once per token).

Launch helpers (Hydra overrides, environment) are in :mod:`.launch`.
"""

from __future__ import annotations

import os
import sys

_REGISTERED = False

ENV_SWITCH = "DEVENUS_VERL_CPU"


def has_accelerator() -> bool:
    """True when torch sees a CUDA (or ROCm) device, or an Ascend NPU."""
    import torch

    if torch.cuda.is_available():
        return True
    npu = getattr(torch, "npu", None)
    try:
        return bool(npu is not None and npu.is_available())
    except Exception:
        return False


def is_enabled() -> bool:
    """Whether the CPU backend should be installed in this process."""
    switch = os.environ.get(ENV_SWITCH, "").strip().lower()
    if switch in ("0", "false", "no", "off"):
        return False
    if switch in ("1", "true", "yes", "on"):
        return True
    return not has_accelerator()


HF_ROLLOUT_NAME = "hf"
HF_SERVER_ADAPTER_FQN = "devenus.adapters.verl.cpu.hf_rollout.HFServerAdapter"

# A process may import one of this package's verl-importing modules (``platform``, ``hf_rollout``)
# before verl: e.g. a fresh Ray worker unpickling the rollout server class. That import runs
# ``verl/__init__``, which loads the plugin, which calls :func:`register` while the module is still
# half-executed. Parts that need such a module are then deferred: the half-executed module is marked
# (``_INSTALL_WHEN_READY``) and installs itself when complete, so it never imports this package back.


def _mid_import(module: str) -> bool:
    mod = sys.modules.get(f"{__name__}.{module}")
    return mod is not None and not getattr(mod, "_DEVENUS_MODULE_READY", False)


def _load_hf_replica():
    from .hf_rollout import HFRolloutReplica

    return HFRolloutReplica


def register_hf_rollout() -> None:
    """Register ``hf`` in verl's replica registry (public, lazy loader) and worker-side rollout
    registry (``verl.workers.rollout.base._ROLLOUT_REGISTRY``, a private dict of class paths)."""
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(HF_ROLLOUT_NAME, _load_hf_replica)
    rollout_base._ROLLOUT_REGISTRY[(HF_ROLLOUT_NAME, "async")] = HF_SERVER_ADAPTER_FQN


def register(force: bool = False) -> bool:
    """Install the CPU backend into verl in this process. Returns True if it is (now) installed."""
    global _REGISTERED
    if _REGISTERED:
        return True
    if not (force or is_enabled()):
        return False

    from .shims import install_torch_shims, pin_torch_threads

    pin_torch_threads()
    install_torch_shims()
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
    _REGISTERED = True
    if _mid_import("platform"):
        sys.modules[f"{__name__}.platform"]._INSTALL_WHEN_READY = True  # platform.py finishes it at its end
    else:
        from .platform import install as install_platform

        install_platform()
    register_hf_rollout()
    from .logprobs import install as install_logprobs
    from .val_metrics import install as install_val_metrics

    install_val_metrics()
    install_logprobs()
    return True


__all__ = ["ENV_SWITCH", "has_accelerator", "is_enabled", "register", "register_hf_rollout"]
