"""Generation: ``n`` sampled responses per chat prompt, behind one backend interface (docs/generate.md).

The guarantee: sample ``j`` of the prompt with key ``k`` depends only on ``(seed, k, j)`` (and the model),
not on which other prompts share its batch, the batch size or the order. The HF backend draws each row
from its own generator seeded by :func:`row_seed` (:mod:`devenus.generate.sampler`); vLLM draws a prompt's
``n`` samples in one request seeded from ``(seed, k)``.

- :class:`Sample` the one sample type; :class:`Sampling` the sampling parameters;
- :class:`Backend` the protocol; :data:`BACKENDS` the registry (``hf``, ``vllm``; a plugin registers its
  own); :func:`make_backend` builds one by name.

Importing this package imports no torch (the backends are registered lazily).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from devenus.registry import Registry

__all__ = ["BACKENDS", "Backend", "Sample", "Sampling", "make_backend", "row_seed"]


@dataclass(frozen=True)
class Sample:
    response_ids: list[int]  # generated tokens, EOS included when one was produced
    text: str  # decoded without special tokens
    truncated: bool  # hit max_new_tokens without EOS: no answer


@dataclass(frozen=True)
class Sampling:
    """``temperature=0``: greedy. ``top_k=-1``: the whole vocabulary."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 96
    seed: int = 0
    top_k: int = -1


def row_seed(seed: int, key: str, index: int) -> int:
    """The 63-bit seed of sample ``index`` of the prompt keyed ``key``: a hash of the three, nothing else."""
    return int.from_bytes(hashlib.sha256(f"{seed}\0{key}\0{index}".encode()).digest()[:8], "little") & ((1 << 63) - 1)


class Backend(Protocol):
    name: str

    def generate(self, prompts: Sequence[Sequence[dict]], keys: Sequence[str], n: int, sampling: Sampling,
                 progress: Callable[[int], None] | None = None) -> list[list[Sample]]:
        """``n`` samples for each chat prompt, sample ``j`` of ``prompts[i]`` drawn from ``(sampling.seed,
        keys[i], j)``; ``progress(k)`` is called as k more prompts finish (0: a heartbeat)."""
        ...


#: backend name -> class; built by :func:`make_backend` with the keywords the class lists in ``options``
BACKENDS: Registry[type] = Registry("generation backend", error=ValueError, lazy={
    "hf": "devenus.generate.hf:HFBackend", "vllm": "devenus.generate.vllm:VLLMBackend"})


def make_backend(name: str, model_dir: Any = None, **kw) -> Backend:
    """The backend registered as ``name`` on ``model_dir``, or ``auto`` (vllm where it is importable and a GPU
    is visible, else hf). Keywords the backend does not list in its ``options`` are dropped."""
    if name == "auto":
        import importlib.util

        name = "hf"
        if importlib.util.find_spec("vllm") is not None:
            import torch

            if torch.cuda.is_available():
                name = "vllm"
    if name not in BACKENDS:
        raise ValueError(BACKENDS.unknown(name, [*BACKENDS.names(), "auto"]))
    cls = BACKENDS.get(name)
    return cls(model_dir, **{k: v for k, v in kw.items() if k in cls.options})
