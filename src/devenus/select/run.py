"""One selection run: the config and what it resolves to, resolved once and handed to every stage.

A :class:`SelectionRun` resolves the pool (its file, rows, identity and Arrow table), the model (loaded on
first use, once) and the four stage folders' identities, each at most once: the pool file is hashed once
per run, however many stages run. The stages (:mod:`devenus.select.stages`) take it, never the bare config;
a Ray Data actor makes its own from the run's config and asks it for a stage's shard work by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from devenus.registry import Registry
from devenus.select.config import SelectConfig
from devenus.select.route.router import get_router
from devenus.select.shards import Stage
from devenus.sources import load_model, model_identity, resolve_pool


#: stage name -> its shard work, ``cls(run, stage) -> work(i)``: what an actor is told by name (and the stage
#: modules, which reach the actors through their loop, stay above this module)
SHARD_WORK: Registry = Registry("sharded stage", lazy={"generate": "devenus.select.stages.generate:GenerateWork",
                                                       "score": "devenus.select.stages.score:ScoreWork"})


def shard_ranges(n: int, size: int) -> list[range]:
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def bar(total: int, desc: str, progress: bool | None, unit: str = "q"):
    from devenus.progress import progress_bar  # a bar on a terminal, plain lines in a log file

    return progress_bar(total, desc, unit, enabled=progress, smoothing=0.1, dynamic_ncols=True)


@dataclass
class SelectionRun:
    """``SelectionRun(cfg, model=None)``; ``model``: an HF ``(model, tokenizer)`` pair, a zero-argument loader
    of one, or None (the config's ``generate.model``). Every attribute is computed on first use and kept."""

    cfg: SelectConfig
    model: Any = None
    _stages: dict[str, Stage] = field(default_factory=dict, init=False, repr=False)
    _pair: Any = field(default=None, init=False, repr=False)

    @classmethod
    def of(cls, run: "SelectionRun | SelectConfig", model=None) -> "SelectionRun":
        """``run`` itself, or a new run of the config ``run`` (a run's model is given when the run is made)."""
        if isinstance(run, SelectionRun):
            if model is not None:
                raise TypeError("a model for an existing SelectionRun: give it as SelectionRun(cfg, model=...)")
            return run
        return cls(run, model)

    # -- the pool
    @cached_property
    def pool(self) -> Path:
        """The pool's records Parquet (a named pool is built on first use)."""
        return resolve_pool(self.cfg.pool)

    @cached_property
    def rows(self) -> list[dict]:
        """The pool's first ``limit`` rows, validated."""
        from devenus.records import read_records

        rows = read_records(self.pool)
        return rows[: self.cfg.limit] if self.cfg.limit is not None else rows

    @cached_property
    def parent(self):
        """The pool as a version's parent (:func:`devenus.records.versions.parent_of`): the one hash of its file."""
        from devenus.records.versions import parent_of

        return parent_of(self.pool)

    @cached_property
    def pool_identity(self) -> dict[str, Any]:
        p = self.parent
        return {"pool": p.name, "pool_sha256": p.sha256, "limit": self.cfg.limit, "shard_size": self.cfg.shard_size}

    @cached_property
    def pool_table(self):
        """The whole pool as one Arrow table (pandas index columns dropped, as ``read_records`` drops them);
        not validated: the version writer validates every row it writes."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from devenus.records import RecordError

        try:
            t = pq.read_table(str(self.pool))
        except (pa.ArrowException, OSError) as exc:
            raise RecordError(f"cannot read {self.pool} as a Parquet records file: {exc}") from exc
        keep = [c for c in t.column_names if not c.startswith("__index_level_")]
        for c in ("extra_info", "reward_model"):
            if c not in keep:
                raise RecordError(f"{self.pool} has no {c} column: not a records file")
        return t.select(keep).combine_chunks()

    @cached_property
    def shards(self) -> list[range]:
        """Row positions of each shard of the (limited) pool."""
        return shard_ranges(len(self.rows), self.cfg.shard_size)

    def part(self, i: int) -> list[dict]:
        """Shard ``i``'s rows."""
        return [self.rows[j] for j in self.shards[i]]

    # -- the model
    @cached_property
    def model_identity(self) -> dict[str, str]:
        # the weights' content hash: a folder whose weights changed in place makes new samples
        return model_identity(self.cfg.generate.model)

    def load_model(self):
        """``(model, tokenizer)``, loaded (or taken from ``model``: a pair, a zero-argument loader, or None for the
        config's model name) on the first call and kept."""
        if self._pair is None:
            m = self.model
            self._pair = load_model(self.cfg.generate.model) if m is None else (m() if callable(m) else m)
        return self._pair

    # -- the stage folders
    def stage(self, name: str) -> Stage:
        """The folder of stage ``name`` with the identity its outputs are made under (nothing written)."""
        if name not in self._stages:
            cfg = self.cfg
            base = {"input": self.pool_identity, **cfg.generate_identity(), "model": self.model_identity}
            conf = {"generate": base}
            conf["score"] = {**base, **cfg.score_identity()}
            conf["route"] = {**conf["score"], **cfg.section("route")}
            if get_router(cfg.route.selector).annotates_while_routing:  # the probes' labels are part of the routing
                conf["route"]["annotation"] = cfg.materialize.annotation
            self._stages[name] = Stage(Path(cfg.out) / name, name, conf[name])
        return self._stages[name]

    def shard_worker(self, name: str) -> "Callable[[int], int | None]":
        """Stage ``name``'s work on one shard, ``work(i) -> tokens or None`` (``close()`` when done), on this
        run's stage folder: what the single-process loop and each Ray Data actor call."""
        return SHARD_WORK.get(name)(self, self.stage(name))
