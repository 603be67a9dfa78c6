"""Reading and writing record files (Parquet).

:func:`write_records` validates the rows, builds a table with the explicit schema
(:func:`~devenus.records.schema.records_schema`) and writes it through :func:`devenus.atomic.atomic_write`:
a crash (or any exception) before the rename leaves an existing file untouched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from devenus.atomic import atomic_write

from .schema import (
    EXTRA_INFO,
    EXTRA_INFO_STANDARD,
    METHOD_COLUMNS,
    SIMULATION,
    SIMULATION_FIELDS,
    records_schema,
)
from .column_rules import _fields
from .validate import STORE_REFUSED, Issue, RecordError, find_table_issues, rows_table, to_python

_KNOWN_COLUMNS = set(METHOD_COLUMNS) | {SIMULATION}


def normalize_rows(rows: Any) -> tuple[list[dict[str, Any]], Any]:
    """Rows with every struct filled to one key set (missing keys -> None), and their schema: the rows
    of :func:`records_to_table` (not validated) read back. The input rows are not modified."""
    table = records_to_table(rows, validate=False)
    return table.to_pylist(), table.schema


def records_to_table(rows: Any, *, validate: bool = True):
    """A ``pyarrow.Table`` of ``rows`` (list of dicts or DataFrame) with the explicit records schema,
    built once (:func:`~devenus.records.validate.rows_table`).

    With ``validate`` (default) a :class:`RecordError` is raised if the rows break the contract;
    without, only where pyarrow cannot store a row.
    """
    table, issues = rows_table(rows)
    if validate and issues:
        raise RecordError(issues)
    stored = [i for i in issues if i.message.startswith(STORE_REFUSED)]
    if stored:
        raise RecordError(f"cannot build a records table: {stored[0]}")
    return table


def _write_parquet(table, fileobj) -> None:
    """Write ``table`` as Parquet to an open binary file (one seam, so tests can simulate a crash)."""
    import pyarrow.parquet as pq

    pq.write_table(table, fileobj)


def write_records(rows: Any, path: str | os.PathLike[str], *, validate: bool = True) -> Path:
    """Write ``rows`` (list of dicts or DataFrame) to the Parquet file ``path``, atomically.

    Validates first (unless ``validate=False``); writes a temporary file next to ``path``, fsyncs it
    and ``os.replace``-s it over ``path``. On any exception the temporary file is removed and a file
    already at ``path`` is left as it was. Parent directories are created. Returns ``path``.

    This writes a bare file; a dataset *version* (a command's output) goes through
    :func:`devenus.records.versions.write_version`, which adds the manifest.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"output {path} is a directory (expected a .parquet file path)")
    table = records_to_table(rows, validate=validate)
    with atomic_write(path) as tmp, open(tmp, "wb") as f:
        _write_parquet(table, f)
        f.flush()
    return path


def check_input(path: str | os.PathLike[str], what: str = "input") -> Path:
    """``path`` as a Path if it is a readable file; a clear error (not found / is a directory) if not."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a directory (expected a file)")
    if not path.exists():
        raise FileNotFoundError(f"{what} not found: {path}")
    return path


def read_records(path: str | os.PathLike[str], *, validate: bool = True) -> list[dict[str, Any]]:
    """Read a records Parquet file into a list of plain python dicts (lists, dicts, str, ...): the rows
    of :func:`read_records_table`."""
    return [to_python(r) for r in read_records_table(path, validate=validate).to_pylist()]


def read_records_table(path: str | os.PathLike[str], *, validate: bool = True):
    """Read a records Parquet file as one ``pyarrow.Table``.

    Pandas index columns (``__index_level_*``) are dropped. With ``validate`` (default) the table is
    checked column-wise (:func:`~devenus.records.validate.find_table_issues`) and a :class:`RecordError`
    naming the file and each bad row is raised if it breaks the contract.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    check_input(path, "records file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise RecordError(f"cannot read {path} as a Parquet records file: {exc}") from exc
    keep = [n for n in table.column_names if not n.startswith("__index_level_")]
    if len(keep) != len(table.column_names):
        table = table.select(keep)
    if validate:
        issues = find_table_issues(table)
        if issues:
            raise RecordError(issues, header=f"records in {path} break the contract", hint=fix_hint(path, issues))
    return table


#: fields a verl-prepared file lacks (or types differently) and an import adds
_VERL_GAPS = {f"{EXTRA_INFO}.labeled", f"{EXTRA_INFO}.label_source", f"{EXTRA_INFO}.source", f"{EXTRA_INFO}.index"}


def fix_hint(path: str | os.PathLike[str], issues: list[Issue]) -> str:
    """The command that turns ``path`` into a records file, named in the contract error."""
    fields = {i.field for i in issues}
    if fields & _VERL_GAPS:
        return (f"if this is verl's own layout (prompt, reward_model.ground_truth, extra_info.index), convert it:\n"
                f"  devenus import {path} --from-verl --out {Path(path).with_suffix('')}.records.parquet")
    return (f"if this is raw question/answer data, import it:\n"
            f"  devenus import {path} --out {Path(path).with_suffix('')}.records.parquet")


def record_file_rows(path: str | os.PathLike[str]) -> int:
    """Row count of a records file from its Parquet footer (no data read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = check_input(path, "records file")
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise RecordError(f"cannot read {path} as a Parquet records file: {exc}") from exc


def iter_tables(path: str | os.PathLike[str], *, batch_rows: int = 4096, columns: list[str] | None = None):
    """A records file as pyarrow Tables of ``batch_rows`` rows: memory is bounded by one batch. Not
    validated here (a version writer validates what it writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = check_input(path, "records file")
    try:
        pf = pq.ParquetFile(path)
        names = [n for n in pf.schema_arrow.names if not n.startswith("__index_level_")]
        if columns is not None:
            names = [n for n in names if n in columns]
        for batch in pf.iter_batches(batch_size=batch_rows, columns=names):
            yield pa.Table.from_batches([batch])
    except (pa.ArrowException, OSError) as exc:
        raise RecordError(f"cannot read {path} as a Parquet records file: {exc}") from exc


def iter_records(path: str | os.PathLike[str], *, batch_rows: int = 4096, columns: list[str] | None = None):
    """Rows of a records file as plain python dicts, in batches (lists) of ``batch_rows``
    (:func:`iter_tables`' tables as rows)."""
    for table in iter_tables(path, batch_rows=batch_rows, columns=columns):
        yield table.to_pylist()  # plain python values already (no numpy: that is pandas)


def records_schema_of(path: str | os.PathLike[str]):
    """The records schema for rows read from ``path``: the standard fields with their standard types,
    plus the file's own extra metadata fields with the file's types (so that a stream of batches
    keeps one schema even where its first batch holds only nulls)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(check_input(path, "records file"))

    def extras(name: str, standard) -> dict:
        fields = _fields(schema.field(name).type) if name in schema.names else {}
        return {n: t for n, t in fields.items() if n not in standard}

    cols = {n: schema.field(n).type for n in schema.names
            if n not in _KNOWN_COLUMNS and not n.startswith("__index_level_")}
    return records_schema(extras(EXTRA_INFO, EXTRA_INFO_STANDARD), extras(SIMULATION, SIMULATION_FIELDS), cols)
