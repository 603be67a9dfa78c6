"""The generate stage: G sampled responses per pool question, one Parquet shard per ``shard_size`` questions
(``<out>/generate/shard-*.parquet``: ``index``, ``sample``, ``response_ids``, ``response``, ``truncated``,
``n_tokens``), by the configured generator (``generate.generator``)."""

from __future__ import annotations

from pathlib import Path

from devenus.select.config import SelectConfig
from devenus.select.generate import make_generator
from devenus.select.run import SelectionRun
from devenus.select.shards import Stage, write_table
from devenus.select.stages.sharded import run_sharded


def generate_shard(gen, part: list[dict], path: Path) -> int:
    """Generate one shard's samples and write them to ``path``; returns the tokens generated."""
    import pyarrow as pa

    keys = [r["extra_info"]["index"] for r in part]
    samples = gen.generate([r["prompt"] for r in part], keys)
    cols: dict[str, list] = {"index": [], "sample": [], "response_ids": [], "response": [], "truncated": [], "n_tokens": []}
    for k, ss in zip(keys, samples):
        for j, smp in enumerate(ss):
            cols["index"].append(k)
            cols["sample"].append(j)
            cols["response_ids"].append(smp.response_ids)
            cols["response"].append(smp.text)
            cols["truncated"].append(smp.truncated)
            cols["n_tokens"].append(len(smp.response_ids))
    table = pa.table({"index": pa.array(cols["index"], pa.string()), "sample": pa.array(cols["sample"], pa.int32()),
                      "response_ids": pa.array(cols["response_ids"], pa.list_(pa.int32())),
                      "response": pa.array(cols["response"], pa.string()),
                      "truncated": pa.array(cols["truncated"], pa.bool_()),
                      "n_tokens": pa.array(cols["n_tokens"], pa.int32())})
    write_table(table, path)
    return sum(cols["n_tokens"])


class GenerateWork:
    """Generate shard ``i`` of a run: ``work(i) -> tokens``; ``close()`` releases the generator (a vLLM engine
    holds most of the GPU; the HF generator has no close: its model is the scorer, shared through the run)."""

    def __init__(self, run: SelectionRun, st: Stage):
        self.run, self.st = run, st
        self.gen = make_generator(run.cfg, run.load_model)  # vLLM loads no HF copy: the loader is not called

    def __call__(self, i: int) -> int:
        return generate_shard(self.gen, self.run.part(i), self.st.shard_path(i))

    def close(self) -> None:
        getattr(self.gen, "close", lambda: None)()


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
