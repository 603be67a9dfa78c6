"""The four stages of active selection, one module each, every one resumable (:mod:`devenus.select.shards`):

``generate``    -> ``<out>/generate/shard-*.parquet``  one row per (question, sample): tokens, text, truncated
``score``       -> ``<out>/score/shard-*.parquet``     one row per (question, sample): answer, reward, signals
                   ``<out>/score/questions-*.parquet`` one row per question: aggregated uncertainties, vote
``route``       -> ``<out>/route/shard-00000.parquet`` one row per question: decision, rank, routing score
``materialize`` -> the next dataset version (records Parquet + manifest) through records.versions

Every table is keyed by ``extra_info.index`` (column ``index``) and, per sample, ``sample``. Each stage
takes a :class:`~devenus.select.run.SelectionRun` (or a config, made into one), which resolves the pool,
its hash and the model once for all of them.
"""

from __future__ import annotations

from devenus.select.run import SelectionRun
from devenus.select.stages.generate import run_generate
from devenus.select.stages.materialize import run_materialize
from devenus.select.stages.route import run_route
from devenus.select.stages.score import run_score

__all__ = ["SelectionRun", "run_all", "run_generate", "run_materialize", "run_route", "run_score"]


def run_all(run, *, force: bool = False, progress: bool | None = None, model=None, actors: int = 0):
    """All four stages on one :class:`SelectionRun` (or config); each resumes from its last complete shard.
    The model is loaded once, and only if a stage has work that needs it."""
    run = SelectionRun.of(run, model)
    run_generate(run, force=force, progress=progress, actors=actors)
    run_score(run, force=force, progress=progress, actors=actors)
    run_route(run, force=force, progress=progress)
    return run_materialize(run, force=force, progress=progress)
