"""Stage outputs as numbered Parquet shards, each written atomically: what makes a stage resumable.

A stage folder holds ``stage.json`` (the config the shards were made with) and ``shard-NNNNN.parquet``
files. A shard exists only complete (temporary file, fsync, rename), so a stage killed at any point
and rerun skips the shards it finds and redoes the rest; shards depend only on the config and their
own questions, so the result is byte-identical to an uninterrupted run. ``done.json`` marks the
whole stage complete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devenus.atomic import atomic_write, write_text_atomic


class StageError(ValueError):
    """A stage folder made with another config, or an earlier stage that is not complete."""


def write_table(table, path: Path) -> Path:
    """Write a pyarrow table to ``path`` atomically (deterministic bytes for the same table)."""
    import pyarrow.parquet as pq

    with atomic_write(path) as tmp:
        pq.write_table(table, str(tmp), compression="zstd")
    return path


def write_json(obj: Any, path: Path) -> Path:
    return write_text_atomic(path, json.dumps(obj, sort_keys=True, indent=1, default=list) + "\n")


class Stage:
    """One stage's folder: ``Stage(root / "generate", config_dict)``; ``open(force)`` checks or
    records the config; ``shard_path(i)``, ``has(i)``, ``finish(summary)``, ``done``."""

    def __init__(self, folder: Path, name: str, config: dict[str, Any]):
        self.folder = Path(folder)
        self.name = name
        self.config = config

    def _made_with_another_config(self) -> bool | None:
        """Whether ``stage.json`` records another config than this stage's (None: the folder has none)."""
        meta = self.folder / "stage.json"
        if not meta.exists():
            return None
        have = json.loads(meta.read_text(encoding="utf-8"))
        return have != json.loads(json.dumps(self.config, sort_keys=True, default=list))

    def open(self, force: bool = False) -> "Stage":
        self.folder.mkdir(parents=True, exist_ok=True)
        other = self._made_with_another_config()
        # a stage that wrote no shard made nothing with the other config: its stage.json is stale
        # state (a run refused before its first shard), so this run starts the stage afresh
        if other and not force and self.made_anything():
            raise StageError(f"{self.folder} holds '{self.name}' outputs made with another config; use another "
                             "output folder, or --force to redo this stage")
        if other is False and not force:
            return self
        if force:
            for p in self.folder.glob("*.parquet"):  # shards and any per-shard side tables
                p.unlink()
            (self.folder / "done.json").unlink(missing_ok=True)
        write_json(self.config, self.folder / "stage.json")
        return self

    def made_anything(self) -> bool:
        """Whether the folder holds a shard (or side table) or the done mark."""
        return self.done or any(self.folder.glob("*.parquet"))

    def check(self) -> "Stage":
        """For an earlier stage: refuse outputs made with another config (writes nothing)."""
        if self._made_with_another_config():
            raise StageError(f"{self.folder} holds '{self.name}' outputs made with another config: rerun "
                             f"'devenus select {self.name}' with --force, or use another output folder")
        return self

    def shard_path(self, i: int) -> Path:
        return self.folder / f"shard-{i:05d}.parquet"

    def has(self, i: int) -> bool:
        return self.shard_path(i).exists()

    @property
    def done(self) -> bool:
        return (self.folder / "done.json").exists()

    def finish(self, summary: dict[str, Any]) -> None:
        write_json(summary, self.folder / "done.json")

    def summary(self) -> dict[str, Any]:
        return json.loads((self.folder / "done.json").read_text(encoding="utf-8"))

    def require_done(self, before: str) -> "Stage":
        if not self.done:
            raise StageError(f"stage '{self.name}' in {self.folder} is not complete: run "
                             f"'devenus select {self.name}' before '{before}'")
        return self

    def read_all(self, columns: list[str] | None = None, table: str = "shard"):
        """All shards of a complete stage (``table``: or a per-shard side table's files, ``<table>-*.parquet``),
        concatenated in shard order."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        paths = sorted(self.folder.glob(f"{table}-*.parquet"))
        return pa.concat_tables([pq.read_table(str(p), columns=columns) for p in paths])
