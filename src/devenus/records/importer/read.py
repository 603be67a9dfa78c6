"""Stage 1, read: the reader of each input format (by extension), Parquet and rows in memory here,
JSONL, JSON and CSV/TSV in their own modules; malformed input is reported by line, all at once."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..io import check_input
from ..validate import Issue, RecordError, as_rows, to_python
from .chunks import BATCH_ROWS, MAX_READ_ISSUES, Chunk, FileDigest, Raw, _record_chunks
from .read_csv import _csv_chunks, _iter_csv
from .read_json import _iter_json
from .read_jsonl import _jsonl_chunks

RAW_FORMATS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
}


def raw_format(path: str | os.PathLike[str]) -> str:
    path = Path(path)
    fmt = RAW_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(
            f"unknown input format {path.suffix or '(no extension)'!r} for {path}: "
            f"expected one of {sorted(RAW_FORMATS)}"
        )
    return fmt


def iter_chunks(path: str | os.PathLike[str], batch_rows: int = BATCH_ROWS, arrow: bool = True,
                digest: FileDigest | None = None) -> Iterator[Chunk]:
    """The records of a file as :class:`Chunk` s (bounded memory: JSONL in blocks of
    :data:`CHUNK_BYTES`, CSV/TSV and Parquet in ``batch_rows`` records; ``.json`` is one document and
    is loaded whole); raises :class:`RecordError` listing every malformed line, after reading to the
    end (or to :data:`MAX_READ_ISSUES`), so that all of them are reported at once. ``arrow=False``:
    no pyarrow reading (for a caller that wants the records only). ``digest``: fed the bytes as they
    are read (see :class:`FileDigest`)."""
    path = Path(path)
    fmt = raw_format(path)
    check_input(path, "input file")
    issues: list[Issue] = []
    try:
        if fmt == "jsonl":
            chunks: Iterator[Chunk] = _jsonl_chunks(path, issues, arrow, digest)
        elif fmt == "parquet":
            chunks = _parquet_chunks(path, batch_rows)
        elif fmt in ("csv", "tsv") and not arrow:
            chunks = _record_chunks(_iter_csv(path, issues, fmt), batch_rows)
        elif fmt in ("csv", "tsv"):
            chunks = _csv_chunks(path, issues, fmt, batch_rows)
        else:
            chunks = _record_chunks(_iter_json(path, issues, fmt), batch_rows)
        for chunk in chunks:
            if chunk.rows:
                yield chunk
            if len(issues) >= MAX_READ_ISSUES:
                break
    except RecordError:
        raise
    except (OSError, csv.Error, ValueError) as exc:
        raise RecordError(f"cannot read {path} as {fmt}: {exc}") from exc
    if issues:
        raise RecordError(issues, header=f"cannot read {path} as {fmt}")


def read_raw(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a raw data file into a list of dicts, choosing the reader by extension (see
    :func:`iter_chunks` for the errors)."""
    return [r.data for chunk in iter_chunks(path, arrow=False) for r in chunk.raw()]


def _parquet_chunks(path: Path, batch_rows: int) -> Iterator[Chunk]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise RecordError(f"cannot read {path} as parquet: {exc}") from exc
    keep = [n for n in pf.schema_arrow.names if not n.startswith("__index_level_")]
    pos = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=keep):
            table = pa.Table.from_batches([batch])
            yield Chunk(pos, table.num_rows, table,
                        lambda t=table, p0=pos: [Raw(p0 + i, to_python(r)) for i, r in enumerate(t.to_pylist())])
            pos += table.num_rows
    except pa.ArrowException as exc:
        raise RecordError(f"cannot read {path} as parquet (after row {pos}): {exc}") from exc


def _row_chunks(rows: Any) -> Iterator[Chunk]:
    raw = [to_python(r) for r in as_rows(rows)]
    bad = [Issue(i, None, "<record>", f"expected a dict, found {type(r).__name__}")
           for i, r in enumerate(raw) if not isinstance(r, Mapping)]
    if bad:
        raise RecordError(bad, header="cannot import rows")
    if raw:
        yield Chunk(0, len(raw), None, [Raw(i, dict(r)) for i, r in enumerate(raw)])
