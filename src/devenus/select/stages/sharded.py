"""The loop of a sharded stage (generate, score): the shards not yet written, here or on Ray Data actors."""

from __future__ import annotations

from typing import Any, Callable

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
        from devenus.select.generate.ray_data import run_shards

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
