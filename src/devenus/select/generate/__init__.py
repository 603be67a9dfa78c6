"""The generate stage's generator: G samples per question from the configured backend of
:mod:`devenus.generate` (``generate.generator``: ``hf`` on the CPU, the default; ``vllm`` on GPUs), sample
``j`` of a question drawn from ``(generate.seed, its key, j)`` only. :mod:`.ray_data` runs the stage's shards
on a Ray Data actor pool.
"""

from __future__ import annotations

from typing import Sequence

from devenus.generate import Backend, Sample, Sampling, make_backend

__all__ = ["StageGenerator", "make_generator"]


class StageGenerator:
    """A backend with the stage's G and sampling bound: ``generate(prompts, keys)``; ``close()`` releases what
    the backend holds (a vLLM engine)."""

    def __init__(self, backend: Backend, samples: int, sampling: Sampling):
        self.backend, self.samples, self.sampling = backend, samples, sampling

    def generate(self, prompts: Sequence[list[dict]], keys: Sequence[str]) -> list[list[Sample]]:
        return self.backend.generate(prompts, keys, self.samples, self.sampling)

    def close(self) -> None:
        getattr(self.backend, "close", lambda: None)()


def make_generator(cfg, model=None) -> StageGenerator:
    """The configured generator (``generate.generator``, a name in :data:`devenus.generate.BACKENDS`).
    ``model``: an HF ``(model, tokenizer)`` pair or a loader of one (the HF backend only; vLLM loads the model
    folder itself, so no HF copy of the model is loaded for it)."""
    from devenus.sources import load_model, resolve_model

    g = cfg.generate
    pair = model if model is not None else (lambda: load_model(g.model))
    backend = make_backend(g.generator, resolve_model(g.model), model=pair, batch_size=g.batch_size, seed=g.seed,
                           gpu_memory_utilization=g.gpu_memory_utilization,
                           tensor_parallel_size=g.tensor_parallel_size, max_model_len=g.max_model_len)
    return StageGenerator(backend, g.samples, Sampling(g.temperature, g.top_p, g.max_new_tokens, g.seed))
