"""The names :mod:`devenus.select.generate.ray_data` imports, over :class:`~devenus.select.run.SelectionRun`.

Nothing else imports this module: it goes when ray_data's ``ShardWorker`` takes its work from
``SelectionRun(cfg).shard_worker(stage_name)`` (one run per actor) and its ``_actor_config`` resolves the
pool with :func:`devenus.sources.resolve_pool`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from devenus.select.config import GENERATORS, SelectConfig
from devenus.select.run import SelectionRun, model_pair, shard_ranges  # noqa: F401 (ray_data's names)
from devenus.select.shards import Stage
from devenus.sources import resolve_pool

_runs: dict[int, SelectionRun] = {}


def _run(cfg: SelectConfig) -> SelectionRun:
    """One run per config object (an actor's): its pool is read and hashed once."""
    run = _runs.get(id(cfg))
    if run is None or run.cfg is not cfg:
        run = _runs[id(cfg)] = SelectionRun(cfg)
    return run


def pool_path(cfg: SelectConfig) -> Path:
    return resolve_pool(cfg.pool)


def pool_rows(cfg: SelectConfig) -> list[dict]:
    return _run(cfg).rows


def stage(cfg: SelectConfig, name: str) -> Stage:
    return _run(cfg).stage(name)


def _stage(name: str):
    # by name: the stage modules reach ray_data (this module's one importer) through their loop
    return importlib.import_module(f"devenus.select.stages.{name}")


def make_generator(cfg: SelectConfig, model=None):
    return GENERATORS.get(cfg.generate.generator)(cfg, model)


def generate_shard(cfg: SelectConfig, gen, part: list[dict], path: Path) -> int:
    return _stage("generate").generate_shard(gen, part, path)


def score_shard(cfg: SelectConfig, model_tok, part: list[dict], gen_path: Path, st: Stage, i: int) -> None:
    return _stage("score").score_shard(_run(cfg), model_tok, st, i)  # part and gen_path are the run's shard i
