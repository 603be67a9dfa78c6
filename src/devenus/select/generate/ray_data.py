"""Generate and score on a Ray Data actor pool, for pools that outgrow one process or machine.

The unit of work is a shard (the same shards, files and per-shard functions as the single-process
run): ``ray.data.from_items(shard ids).map_batches(ShardWorker, concurrency=actors)``. Each actor
loads the model once and writes its shards itself (atomically, into the stage folder on a shared file
system); the driver only counts finished shards. Since a shard's content depends only on the config
and its questions (per-question seeds), the output is byte-identical to the single-process run, and a
killed run resumes from the shards that exist. Here: CPU actors (``num_cpus`` each, torch 1 thread);
on a cluster, GPU actors: ``generate.actor_gpus`` per actor (with ``generate.generator: vllm`` each
actor holds one vLLM engine).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterator, Sequence


class ShardWorker:
    """A Ray Data callable class: one model per actor; each batch is a list of shard ids."""

    def __init__(self, config: dict, stage_name: str):
        import torch

        from devenus.select.config import load_config
        from devenus.select.work import make_generator, model_pair, pool_rows, stage

        torch.set_num_threads(1)
        self.cfg = load_config(None, _flatten(config))
        self.stage_name = stage_name
        self.rows = pool_rows(self.cfg)
        self.st = stage(self.cfg, stage_name)
        if stage_name == "generate":
            self.model_tok = None
            self.gen = make_generator(self.cfg, lambda: model_pair(None, self.cfg))  # vllm loads no HF copy
        else:
            self.model_tok = model_pair(None, self.cfg)
            self.gen = None

    def __call__(self, batch):
        import numpy as np

        from devenus.select.work import generate_shard, score_shard, shard_ranges, stage

        shards = shard_ranges(len(self.rows), self.cfg.shard_size)
        done = []
        for i in np.asarray(batch["shard"]).tolist():
            part = [self.rows[j] for j in shards[i]]
            if self.stage_name == "generate":
                generate_shard(self.cfg, self.gen, part, self.st.shard_path(i))
            else:
                score_shard(self.cfg, self.model_tok, part, stage(self.cfg, "generate").shard_path(i), self.st, i)
            done.append(i)
        return {"shard": np.asarray(done, dtype=np.int64)}


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
    return out


def run_shards(cfg, stage_name: str, shards: Sequence[int], actors: int, num_cpus: float = 1.0,
               num_gpus: float = 0.0) -> Iterator[int]:
    """Run ``shards`` of a stage on ``actors`` Ray Data actors; yields each shard id as it finishes.
    Starts a local Ray if none is connected (and shuts it down afterwards)."""
    import ray

    started = False
    if not ray.is_initialized():
        # address="local": always a fresh local Ray, never another job's cluster on the same machine
        ray.init(address="local", num_cpus=math.ceil(actors * num_cpus) + 1, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}})
        started = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.from_items([{"shard": int(i)} for i in shards], override_num_blocks=max(1, len(shards)))
        ds = ds.map_batches(ShardWorker, fn_constructor_kwargs={"config": dataclasses.asdict(cfg), "stage_name": stage_name},
                            batch_size=1, concurrency=actors, num_cpus=num_cpus, num_gpus=num_gpus or None)
        for row in ds.iter_rows():
            yield int(row["shard"])
    finally:
        if started:
            ray.shutdown()
