"""Torch-level shims that verl 0.9.1 needs on a host without an accelerator.

Both are installed in-process by :func:`install_torch_shims` (idempotent) and only by the CPU plugin:

1. **Backend string.** verl initialises its process group with
   ``f"cpu:gloo,{device_name}:{backend}"`` (``verl.utils.distributed``). With the ``cpu`` platform this
   is ``"cpu:gloo,cpu:gloo"``, which torch rejects ("Duplicate device type cpu"). The shim wraps
   ``torch.distributed.init_process_group`` and collapses a device-qualified backend string whose
   entries all name one backend into that backend (``"gloo"``).

   The same wrapper rendezvouses a **single-rank** group through an in-memory store instead of
   ``MASTER_PORT``. verl picks that port by binding port 0 and closing the socket
   (``get_master_addr_port``); the TCP store binds it again seconds later, after the worker has
   imported torch. The port is in the ephemeral range, so any other process's outgoing connection
   (a second training run, Ray's own RPCs) can take it in between: a run then dies with
   ``EADDRINUSE``. One rank has no one to meet, so it needs no port. Multi-rank groups keep
   verl's TCP rendezvous unchanged.
2. **Pinned memory.** verl's FSDP2 engine builds the reference model (``forward_only``) with
   ``CPUOffloadPolicy(pin_memory=True)``. Pinning needs an accelerator ("Cannot access accelerator
   device when none is available"). The shim makes ``CPUOffloadPolicy`` construct with
   ``pin_memory=False``.

Plus :func:`pin_torch_threads`: the CPU is about one core; one torch thread is faster and steadier.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import torch

logger = logging.getLogger(__name__)

_SHIM_ATTR = "_devenus_cpu_shim"


def collapse_backend(backend: Any) -> Any:
    """``"cpu:gloo,cpu:gloo"`` -> ``"gloo"``; any other value is returned unchanged.

    Only strings of ``device:backend`` pairs that all name the same backend are collapsed; a real
    mixed string such as ``"cpu:gloo,cuda:nccl"`` is left alone.
    """
    if not isinstance(backend, str) or ":" not in backend:
        return backend
    pairs = [p.strip() for p in backend.split(",") if p.strip()]
    names = set()
    devices = []
    for pair in pairs:
        if ":" not in pair:
            return backend
        device, name = pair.split(":", 1)
        devices.append(device.strip().lower())
        names.add(name.strip().lower())
    if len(names) == 1 and (len(set(devices)) < len(devices) or set(devices) == {"cpu"}):
        return names.pop()
    return backend


def single_rank_rendezvous(kwargs: dict[str, Any]) -> bool:
    """Whether an ``init_process_group`` call may meet through an in-memory store.

    True only for an env:// (or default) rendezvous of a one-rank group with no store of its own:
    ``world_size`` from the call or ``WORLD_SIZE``, rank 0.
    """
    if kwargs.get("store") is not None:
        return False
    if kwargs.get("init_method") not in (None, "env://"):
        return False
    try:
        world_size = int(kwargs.get("world_size", -1))
        if world_size == -1:
            world_size = int(os.environ.get("WORLD_SIZE", "-1"))
        rank = int(kwargs.get("rank", -1))
        if rank == -1:
            rank = int(os.environ.get("RANK", "0"))
    except (TypeError, ValueError):
        return False
    return world_size == 1 and rank == 0


def _patch_init_process_group() -> None:
    import torch.distributed as dist

    original = dist.init_process_group
    if getattr(original, _SHIM_ATTR, False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any):
        if "backend" in kwargs:
            kwargs["backend"] = collapse_backend(kwargs["backend"])
        elif args:
            args = (collapse_backend(args[0]), *args[1:])
        if len(args) <= 1 and single_rank_rendezvous(kwargs):
            kwargs.pop("init_method", None)
            kwargs.update(store=dist.HashStore(), rank=0, world_size=1)
        return original(*args, **kwargs)

    setattr(init_process_group, _SHIM_ATTR, True)
    init_process_group.__wrapped__ = original  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group
    # torch.distributed re-exports it from distributed_c10d; keep both names consistent.
    try:
        import torch.distributed.distributed_c10d as c10d

        if c10d.init_process_group is original:
            c10d.init_process_group = init_process_group
    except Exception:  # pragma: no cover
        pass


def _patch_cpu_offload_policy() -> None:
    try:
        from torch.distributed.fsdp import CPUOffloadPolicy
    except ImportError:  # pragma: no cover - torch < 2.6
        from torch.distributed._composable.fsdp import CPUOffloadPolicy

    original = CPUOffloadPolicy.__init__
    if getattr(original, _SHIM_ATTR, False):
        return

    @functools.wraps(original)
    def __init__(self, pin_memory: bool = True, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        kwargs.pop("pin_memory", None)
        original(self, False, *args, **kwargs)

    setattr(__init__, _SHIM_ATTR, True)
    CPUOffloadPolicy.__init__ = __init__


def pin_torch_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads (default 1, or ``DEVENUS_TORCH_THREADS``); returns the value set."""
    if n is None:
        try:
            n = int(os.environ.get("DEVENUS_TORCH_THREADS", "1"))
        except ValueError:
            n = 1
    n = max(1, n)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # only settable once, before any inter-op work
    return n


def install_torch_shims() -> None:
    """Install both torch shims (idempotent)."""
    _patch_init_process_group()
    _patch_cpu_offload_policy()
