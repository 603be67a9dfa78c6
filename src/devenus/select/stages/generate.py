"""The generate stage: G sampled responses per pool question, one Parquet shard per ``shard_size`` questions
(``<out>/generate/shard-*.parquet``: ``index``, ``sample``, ``response_ids``, ``response``, ``truncated``,
``n_tokens``), by the configured backend of :mod:`devenus.generate` (``generate.generator``: ``hf`` on the CPU,
the default; ``vllm`` on GPUs), sample ``j`` of a question drawn from ``(generate.seed, its key, j)`` only."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from devenus.generate import Backend, Sample, Sampling, make_backend
from devenus.select.config import SelectConfig
from devenus.select.run import SelectionRun
from devenus.select.shards import Stage, write_table
from devenus.select.stages.sharded import run_sharded


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


def generate_shard(gen, part: list[dict], path: Path) -> int:
    """Generate one shard's samples and write them to ``path``; returns the tokens generated."""
    import pyarrow as pa

    keys = [r["extra_info"]["index"] for r in part]
    samples = gen.generate([r["prompt"] for r in part], keys)
    rows = [(k, j, smp) for k, ss in zip(keys, samples) for j, smp in enumerate(ss)]
    n_tokens = [len(smp.response_ids) for _, _, smp in rows]
    table = pa.table({"index": pa.array([k for k, _, _ in rows], pa.string()),
                      "sample": pa.array([j for _, j, _ in rows], pa.int32()),
                      "response_ids": pa.array([smp.response_ids for _, _, smp in rows], pa.list_(pa.int32())),
                      "response": pa.array([smp.text for _, _, smp in rows], pa.string()),
                      "truncated": pa.array([smp.truncated for _, _, smp in rows], pa.bool_()),
                      "n_tokens": pa.array(n_tokens, pa.int32())})
    write_table(table, path)
    return sum(n_tokens)


class GenerateWork:
    """Generate shard ``i`` of a run: ``work(i) -> tokens``; ``close()`` releases the generator (a vLLM engine
    holds most of the GPU; the HF generator has no close: its model is the scorer, shared through the run)."""

    def __init__(self, run: SelectionRun, st: Stage):
        self.run, self.st = run, st
        self.gen = make_generator(run.cfg, run.load_model)  # vLLM loads no HF copy: the loader is not called

    def __call__(self, i: int) -> int:
        return generate_shard(self.gen, self.run.part(i), self.st.shard_path(i))

    def close(self) -> None:
        self.gen.close()


def run_generate(run: SelectionRun | SelectConfig, *, force: bool = False, progress: bool | None = None, model=None,
                 actors: int = 0) -> Stage:
    """The generate stage; ``actors > 0`` runs the shards on a Ray Data actor pool instead."""
    run = SelectionRun.of(run, model)
    if run.cfg.generate.generator == "vllm" and not actors:  # (Ray actors import it where they run)
        from devenus.generate.vllm import import_vllm

        import_vllm()  # a missing vLLM is one line now, before the pool is read
    # the vLLM engine is shut down when the loop ends, before the score stage loads its scorer
    return run_sharded(run, "generate", force=force, progress=progress, actors=actors,
                           summary={"samples_per_question": run.cfg.generate.samples})
