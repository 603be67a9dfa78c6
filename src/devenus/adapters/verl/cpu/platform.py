"""A ``cpu`` platform for verl 0.9.1's ``PlatformRegistry`` (``verl.plugin.platform``).

verl 0.9.1 routes every device question through ``get_platform()``: the device name used for
tensors and meshes, the ``torch.<device>`` module (``get_torch_device()``), the collective backend,
the Ray resource name that placement groups ask for. It ships ``nvidia``, ``npu`` and ``rocm`` only.

On a host without an accelerator this platform answers:

- ``device_name`` ``"cpu"``, ``current_device()`` the *string* ``"cpu"`` (verl calls
  ``tensor.to(get_device_id())`` and ``torch.device(get_device_id())``; both accept ``"cpu"``);
- ``communication_backend_name()`` ``"gloo"`` (verl then asks torch for ``"cpu:gloo,cpu:gloo"``,
  which :mod:`.shims` collapses into ``"gloo"``);
- ``ray_resource_name()`` ``"GPU"``: verl's placement groups and workers ask Ray for one ``GPU`` per
  rank, so the launcher declares fake GPUs (``ray_kwargs.ray_init.num_gpus``). ``CUDA_VISIBLE_DEVICES``
  that Ray then sets is harmless on a CPU-only torch;
- ``device_module`` a :class:`CPUDeviceModule`: ``is_available()`` is ``False`` (verl reads it as
  "an accelerator is usable" and skips its GPU-memory housekeeping), memory queries report this
  process's RSS, everything else verl calls on ``torch.cuda`` is a harmless no-op.
"""

from __future__ import annotations

import logging
import os
import random
import resource
import types
from contextlib import contextmanager, nullcontext
from typing import Any, Optional

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

logger = logging.getLogger(__name__)

PLATFORM_NAME = "cpu"


def _rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # pragma: no cover - psutil is a ray dependency
        return 0


def _peak_rss_bytes() -> int:
    # Linux reports ru_maxrss in KiB.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class CPUDeviceModule(types.ModuleType):
    """Stands in for ``torch.cuda`` where verl calls ``get_torch_device().<fn>()``.

    Explicit answers for what verl 0.9.1 calls (empty_cache, synchronize, set_device, rng state,
    memory statistics, streams...); any other attribute falls back to ``torch.cpu``'s and then to a
    no-op, so that a housekeeping call never crashes a CPU run. ``is_available()`` is ``False``.
    """

    def __init__(self) -> None:
        super().__init__("devenus_cpu_device")
        self._missing_logged: set[str] = set()

    # --- availability and identity
    def is_available(self) -> bool:
        return False

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> str:
        return "cpu"

    def set_device(self, device: Any = None) -> None:
        return None

    def get_device_name(self, device: Any = None) -> str:
        return "cpu"

    def get_device_capability(self, device: Any = None) -> tuple[None, None]:
        return (None, None)

    # --- synchronisation and caches
    def synchronize(self, device: Any = None) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def ipc_collect(self) -> None:
        return None

    def set_per_process_memory_fraction(self, fraction: float, device: Any = None) -> None:
        return None

    # --- RNG: the CPU generator is the only one
    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, new_state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(new_state)

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    # --- memory statistics: report this process's resident set
    def memory_allocated(self, device: Any = None) -> int:
        return _rss_bytes()

    def memory_reserved(self, device: Any = None) -> int:
        return _rss_bytes()

    def max_memory_allocated(self, device: Any = None) -> int:
        return _peak_rss_bytes()

    def max_memory_reserved(self, device: Any = None) -> int:
        return _peak_rss_bytes()

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        return None

    def reset_accumulated_memory_stats(self, device: Any = None) -> None:
        return None

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        try:
            import psutil

            vm = psutil.virtual_memory()
            return int(vm.available), int(vm.total)
        except Exception:  # pragma: no cover
            return 0, 0

    # --- streams and events: torch.cpu has no-op versions (Stream and Event are torch.cpu's, by __getattr__)
    def current_stream(self, device: Any = None) -> Any:
        return torch.cpu.current_stream()

    def stream(self, stream: Any = None) -> Any:
        return nullcontext()

    @property
    def memory(self) -> Any:
        return types.SimpleNamespace(_set_allocator_settings=_noop)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        if name not in self._missing_logged:
            self._missing_logged.add(name)
            logger.debug("CPUDeviceModule: %s is a no-op on the cpu platform", name)
        return _noop


class PlatformCPU(PlatformBase):
    """verl platform for hosts without an accelerator (registered as ``cpu``)."""

    _device_module: Optional[CPUDeviceModule] = None

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        if PlatformCPU._device_module is None:
            PlatformCPU._device_module = CPUDeviceModule()
        return PlatformCPU._device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Auto-detection probes platforms in registration order; answer yes only where no
        # accelerator is present, so a GPU host never picks this platform by accident.
        return not torch.cuda.is_available()

    def current_device(self) -> str:  # type: ignore[override]  # verl uses it as a torch device
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)
        random.seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets CUDA_VISIBLE_DEVICES for the fake GPU resource; a CPU-only torch ignores it.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def rollout_env_vars(self) -> dict[str, str]:
        return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}

    def cudart(self) -> Any:
        return None


def register_platform() -> type[PlatformCPU]:
    """Register :class:`PlatformCPU` as ``cpu`` (idempotent) and return it."""
    if PlatformRegistry.get(PLATFORM_NAME) is not PlatformCPU:
        PlatformRegistry.register(platform=PLATFORM_NAME)(PlatformCPU)
    return PlatformCPU


def activate_platform() -> None:
    """Make ``cpu`` the process's verl platform, even if another one was already resolved."""
    from verl.plugin.platform import platform_manager

    os.environ.setdefault("VERL_PLATFORM", PLATFORM_NAME)
    if os.environ["VERL_PLATFORM"].strip().lower() != PLATFORM_NAME:
        return  # the user chose another platform explicitly
    current = platform_manager._current_platform
    if current is not None and not isinstance(current, PlatformCPU):
        platform_manager.set_platform(PlatformCPU())


def install() -> None:
    """Register the ``cpu`` platform with verl and make it this process's platform."""
    register_platform()
    activate_platform()


_DEVENUS_MODULE_READY = True
# If this module was imported before verl, the plugin ran while it was half-executed and marked it: finish now.
if globals().get("_INSTALL_WHEN_READY"):
    install()
