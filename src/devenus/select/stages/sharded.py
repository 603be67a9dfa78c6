"""The loop of a sharded stage (generate, score): the shards not yet written, here or on Ray Data actors.

On a Ray Data actor pool (``actors > 0``, for pools that outgrow one process or machine) the unit of work
is the same shard, with the same files and per-shard functions as the single-process run:
``ray.data.from_items(shard ids).map_batches(ShardWorker, concurrency=actors)``. Each actor loads the model
once and writes its shards itself (atomically, into the stage folder); the driver only counts finished
shards. Since a shard's content depends only on the config and its questions (per-question seeds), the
output is byte-identical to the single-process run, and a killed run resumes from the shards that exist.

Where: ``generate.ray_address: local`` (the default) starts a fresh Ray on this machine, so the pool is
this machine's CPUs and GPUs; a cluster address (``auto``, ``<head>:6379``) joins that running Ray
cluster instead. The stage folder and the pool are passed to the actors as absolute paths, so on a
cluster every node needs the same install and the run folder on a shared file system at the same
absolute path. CPU actors: ``generate.actor_cpus`` each, torch 1 thread, on hosts without GPUs (Ray no
longer hides the GPUs from an actor that reserves none, so GPU-less actors are refused where the Ray
cluster has GPUs: :func:`gpu_less_actors_error`); GPU actors: ``generate.actor_gpus`` per actor (with
``generate.generator: vllm`` each actor holds one vLLM engine).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterator, Sequence

from devenus.select.run import SelectionRun, bar
from devenus.select.shards import Stage, StageError


def run_sharded(run: SelectionRun, name: str, *, force: bool, progress: bool | None, actors: int,
                summary: dict[str, Any], shard_done: Callable[[Stage, int], bool] | None = None) -> Stage:
    """Open the stage folder, skip the shards already written (and, with ``shard_done(st, i)``, complete), run
    the rest here (:meth:`~devenus.select.run.SelectionRun.shard_worker`) or on a Ray Data actor pool, and mark
    the stage done with ``summary``."""
    rows = run.rows  # read and checked before the stage folder is touched: a refused pool leaves nothing
    if not rows:
        raise StageError(f"the pool {run.pool} has no rows: nothing to select (import or choose a non-empty pool)")
    st = run.stage(name).open(force)
    shards = run.shards
    todo = [i for i in range(len(shards)) if not (st.has(i) and (shard_done is None or shard_done(st, i)))]
    if st.done and not todo:
        return st
    b = bar(len(rows), name, progress)
    b.update(sum(len(shards[i]) for i in range(len(shards)) if i not in todo))
    if actors:
        for i in run_shards(run.cfg, name, todo, actors, num_cpus=run.cfg.generate.actor_cpus,
                            num_gpus=run.cfg.generate.actor_gpus):
            b.update(len(shards[i]))
    elif todo:
        work, tokens = run.shard_worker(name), 0
        try:
            for i in todo:
                n = work(i)
                b.update(len(shards[i]))
                if n:
                    tokens += n
                    b.set_postfix(tok_s=f"{tokens / max(b.format_dict['elapsed'], 1e-9):.0f}", refresh=False)
        finally:
            work.close()  # a vLLM engine holds most of the GPU: released before the next stage loads a model
    b.close()
    st.finish({"questions": len(rows), "shards": len(shards), **summary})
    return st


class ShardWorker:
    """A Ray Data callable class: one model per actor; each batch is a list of shard ids."""

    def __init__(self, config: dict, stage_name: str):
        import torch

        from devenus.select.config import load_config

        torch.set_num_threads(1)
        # one run per actor: the pool read and hashed once, the model loaded once (vLLM loads no HF copy)
        self.work = SelectionRun(load_config(None, _flatten(config))).shard_worker(stage_name)

    def __call__(self, batch):
        import numpy as np

        done = np.asarray(batch["shard"]).tolist()
        for i in done:
            self.work(i)
        return {"shard": np.asarray(done, dtype=np.int64)}


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
    return out


def gpu_less_actors_error(actors: int, actor_gpus: float, cluster_gpus: float) -> str | None:
    """Why ``actors`` actors reserving ``actor_gpus`` GPUs each cannot run on a Ray cluster with
    ``cluster_gpus`` GPUs, or None. Ray (2.60) no longer clears ``CUDA_VISIBLE_DEVICES`` for an actor that
    reserves no GPU, so where there are GPUs every such actor would load its model onto ``cuda:0``."""
    if actors > 0 and actor_gpus == 0 and cluster_gpus > 0:
        return (f"--actors {actors} with generate.actor_gpus=0 on a Ray cluster with {cluster_gpus:g} GPUs: every "
                "actor would load its model onto cuda:0 (Ray does not hide GPUs from actors that reserve none); "
                "set generate.actor_gpus (e.g. --set generate.actor_gpus=1), or run CPU actors where no GPU is "
                "visible (CUDA_VISIBLE_DEVICES= )")
    return None


def _actor_config(cfg) -> dict:
    """The config the actors load: the run folder and the pool as absolute paths (an actor's working
    directory is not the driver's on a cluster)."""
    from pathlib import Path

    from devenus.sources import resolve_pool

    d = dataclasses.asdict(cfg)
    d["out"] = str(Path(cfg.out).resolve())
    d["pool"] = str(resolve_pool(cfg.pool).resolve())
    return d


def run_shards(cfg, stage_name: str, shards: Sequence[int], actors: int, num_cpus: float = 1.0,
               num_gpus: float = 0.0) -> Iterator[int]:
    """Run ``shards`` of a stage on ``actors`` Ray Data actors; yields each shard id as it finishes.
    Unless a Ray is connected already, starts a fresh local one (``generate.ray_address: local``) or joins
    the cluster at ``generate.ray_address``, and disconnects afterwards."""
    import ray

    started = False
    if not ray.is_initialized():
        env = {"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}}
        address = cfg.generate.ray_address
        if address == "local":
            # a fresh local Ray, never another job's cluster on the same machine
            ray.init(address="local", num_cpus=math.ceil(actors * num_cpus) + 1, include_dashboard=False,
                     log_to_driver=False, runtime_env=env)
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=env)
        started = True
    try:
        why = gpu_less_actors_error(actors, num_gpus, ray.cluster_resources().get("GPU", 0))
        if why:
            raise ValueError(why)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.from_items([{"shard": int(i)} for i in shards], override_num_blocks=max(1, len(shards)))
        ds = ds.map_batches(ShardWorker, fn_constructor_kwargs={"config": _actor_config(cfg), "stage_name": stage_name},
                            batch_size=1, concurrency=actors, num_cpus=num_cpus, num_gpus=num_gpus or None)
        for row in ds.iter_rows():
            yield int(row["shard"])
    finally:
        if started:
            ray.shutdown()
