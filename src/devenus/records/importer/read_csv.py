"""The CSV/TSV reader: ``pyarrow.csv`` over blocks of whole lines while the file is plain, Python's
strict ``csv`` reader from the first block that is not (quotes, carriage returns, blank lines)."""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator
from pathlib import Path

from ..validate import Issue, RecordError
from . import chunks as _chunks
from .chunks import Chunk, Raw, _line_blocks, _line_issue, _record_chunks

def _iter_csv(path: Path, issues: list[Issue], fmt: str, offset: int = 0, line0: int = 0,
              header: list[str] | None = None, pos: int = 0) -> Iterator[Raw]:
    """Strict CSV/TSV: a quote that never closes, a stray quote or a row with more or fewer fields
    than the header is an error naming its line (the default reader would swallow or drop data).
    From byte ``offset`` (line ``line0 + 1``, record ``pos``) with ``header`` where the caller has
    read the start of the file."""
    delimiter = "\t" if fmt == "tsv" else ","
    line_of: list[int] = [line0]

    def lines() -> Iterator[str]:
        """Each physical line, decoded one at a time so that a bad byte is reported by its line and
        column, not by a decoder-chunk offset."""
        with open(path, "rb") as f:
            f.seek(offset)
            for lineno, raw in enumerate(f, start=line0 + 1):
                line_of[0] = lineno
                if lineno == 1:
                    raw = raw.removeprefix(codecs.BOM_UTF8)
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise RecordError(f"cannot read {path} as {fmt}: line {lineno}: not UTF-8: byte "
                                      f"0x{raw[exc.start]:02x} at column {exc.start + 1}") from None

    reader = csv.reader(lines(), delimiter=delimiter, strict=True)
    while True:
        start = line_of[0] + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            if "end of data" in str(exc) or "EOF" in str(exc):
                raise RecordError(f"cannot read {path} as {fmt}: line {start}: a quoted field opened here never "
                                  f"closes (runs to the end of the file at line {line_of[0]})") from None
            raise RecordError(f"cannot read {path} as {fmt}: line {line_of[0]}: {exc}") from None
        if not cells:
            continue
        if header is None:
            header = cells
            continue
        if len(cells) != len(header):
            issues.append(_line_issue(start, f"expected {len(header)} fields (as in the header), found {len(cells)}"))
            continue
        yield Raw(pos, dict(zip(header, cells)), start)
        pos += 1


def _csv_chunks(path: Path, issues: list[Issue], fmt: str, batch_rows: int) -> Iterator[Chunk]:
    """CSV/TSV in blocks of whole lines read by pyarrow's CSV reader while the file is plain: no quote
    character, no carriage return, no blank line, a header of distinct names (then each line is one
    record, split at the delimiter, exactly as Python's reader splits it). From the first block that
    is not, the rest of the file is read by Python's strict reader (:func:`_iter_csv`)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    delim = b"\t" if fmt == "tsv" else b","
    chunk_bytes = _chunks.CHUNK_BYTES
    with open(path, "rb") as f:
        first = f.readline()
    plain_header = first.rstrip(b"\n").removeprefix(codecs.BOM_UTF8)
    try:
        header = plain_header.decode("utf-8").split(delim.decode())
    except UnicodeDecodeError:
        header = None
    if (header is None or not first.endswith(b"\n") or not plain_header or b'"' in first or b"\r" in first
            or len(set(header)) != len(header)):
        yield from _record_chunks(_iter_csv(path, issues, fmt), batch_rows)
        return
    parse = pcsv.ParseOptions(delimiter=delim.decode(), quote_char=False, double_quote=False, escape_char=False,
                              newlines_in_values=False, ignore_empty_lines=False)
    convert = pcsv.ConvertOptions(column_types={h: pa.string() for h in header}, strings_can_be_null=False,
                                  quoted_strings_can_be_null=False, check_utf8=True)
    limit = csv.field_size_limit()
    offset, line0, pos = len(first), 1, 0
    with open(path, "rb") as f:
        f.seek(offset)
        for data in _line_blocks(f, chunk_bytes):
            if not data:
                return
            lines = data.count(b"\n") + (not data.endswith(b"\n"))
            table = None
            if b'"' not in data and b"\r" not in data and b"\n\n" not in data and not data.startswith(b"\n"):
                try:
                    table = pcsv.read_csv(pa.BufferReader(data), read_options=pcsv.ReadOptions(
                        column_names=header, block_size=len(data) + 1), parse_options=parse, convert_options=convert)
                except (pa.ArrowException, ValueError):
                    table = None
                import pyarrow.compute as pc

                if table is not None and (table.num_rows != lines or any(
                        (pc.max(pc.binary_length(c)).as_py() or 0) > limit for c in table.columns)):
                    table = None  # (a field over Python's limit: its reader names it)
            if table is None:  # from here on, Python's strict reader
                yield from _record_chunks(_iter_csv(path, issues, fmt, offset, line0, header, pos), batch_rows)
                return
            yield Chunk(pos, table.num_rows, table,
                        lambda t=table, p0=pos, l0=line0: [Raw(p0 + i, r, l0 + i + 1) for i, r in enumerate(t.to_pylist())],
                        line0)
            offset += len(data)
            pos += table.num_rows
            line0 += lines
