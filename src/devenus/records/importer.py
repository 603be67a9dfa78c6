"""Importing raw question/answer data (JSONL, JSON, CSV/TSV, Parquet, rows in memory, verl Parquet).

The import runs in stages, each a function of its own:

1. **read** (:func:`iter_chunks`): the records in :class:`Chunk` s, each a pyarrow table where
   pyarrow reads the block exactly (JSONL in 4 MB blocks by ``pyarrow.json``, plain CSV/TSV by
   ``pyarrow.csv``, Parquet batches) and Python's reading of it (:class:`Raw` records with their
   location, ``line 7`` / ``row 7``) otherwise or on demand. ``.json`` is one document and is loaded
   whole. Malformed input is reported by line: invalid JSON, a non-UTF-8 byte, an integer too long to
   convert, JSON nested too deeply, an unterminated quote or a ragged CSV row.
2. **map fields** (:class:`ColumnStats` -> :func:`detect_fields`): the question, answer, id and
   metadata columns, auto-detected (:data:`QUESTION_FIELDS`, ...) unless named, from the first
   chunk and checked against the whole input's columns at the end (a second pass if they differ);
   multiple-choice layouts (GPQA, ARC, MMLU / MMLU-Pro) are recognised; ``from_verl`` reads verl's
   own layout (``prompt[-1].content``, ``reward_model.ground_truth``, ``extra_info.index``).
3. **normalise** (:func:`normalise_target`, :class:`KeyBuilder`): the final target (``#### 42``, the
   last ``\\boxed{}``), numbers as canonical decimal strings (``1e-07`` -> ``0.0000001``), keys.
   A target no answer can ever match (a bool, a non-finite number, unbalanced braces, longer than
   the verifier extracts) is *refused*: the row is left out and listed with its field and reason.
   Lengths are checked before any pattern runs, and the patterns are linear.
4. **validate** (:func:`build_record`, or :func:`fast_rows` for a whole chunk pyarrow read, with the
   same result): label modes and per-row errors; every bad row at once. ``dedupe="exact"``
   (:class:`Deduper`) leaves out exact repeats of a prompt and its target.
5. **write** (:func:`import_file`): one dataset version through :mod:`.versions` (Parquet +
   manifest whose parent is the raw input's hash); :func:`import_raw` returns the rows instead.

Keys (``extra_info.index``): ``f"{source}/{id}"`` when an id column exists, else
``f"{source}/{sha1(normalised question)[:16]}"``; repeated questions get ``-2``, ``-3``, ... in file
order. Label modes: ``labeled=True`` (every row needs an answer), ``"auto"`` (labeled iff it has one),
``False`` (all unlabeled; answers kept as ``simulation.hidden_answer`` unless ``hidden_answers=False``).
"""

from __future__ import annotations

import bisect
import csv
import functools
import hashlib
import json
import math
import os
import random
import re
import string
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from .columnar import PY_WHITESPACE
from .io import check_input
from .prompts import DEFAULT_CHOICE_TEMPLATE, DEFAULT_PROMPT_TEMPLATE, PromptFormat, prompt_format
from .rows import make_row
from .schema import EXTRA_INFO, EXTRA_INFO_OPTIONAL, EXTRA_INFO_REQUIRED
from .validate import Issue, RecordError, as_rows, to_python, validate_rows
from .versions import Refusal

#: question column names tried in order (a column is used only if its values are strings)
QUESTION_FIELDS: tuple[str, ...] = (
    "question", "problem", "prompt", "query", "input", "Problem", "Question", "instruction",
)
#: answer column names tried in order (first one with at least one non-empty value)
ANSWER_FIELDS: tuple[str, ...] = (
    "answer", "final_answer", "expected_answer", "ground_truth", "target", "Answer", "solution",
    "output",
)
#: long-form answer columns: the final answer must be extracted (\boxed{} or ####) or there is none
SOLUTION_FIELDS: frozenset[str] = frozenset({"solution"})
#: id column names tried in order when ``id_field`` is None
ID_FIELDS: tuple[str, ...] = ("id", "unique_id", "problem_id", "question_id", "idx", "_id", "task_id", "Record ID")
DIFFICULTY_FIELDS: tuple[str, ...] = ("difficulty", "level")
FAMILY_FIELDS: tuple[str, ...] = ("family", "subject", "type", "category")
#: multiple-choice option columns (a list of texts, or ARC's ``{"text": [...], "label": [...]}``)
CHOICE_FIELDS: tuple[str, ...] = ("options", "choices")
#: multiple-choice answer columns: a letter, a 0-based index, an option label or the option text
CHOICE_ANSWER_FIELDS: tuple[str, ...] = ("answerKey", "answer", "answer_index", "label", "Answer")
GPQA_CORRECT = "Correct Answer"
GPQA_INCORRECT: tuple[str, ...] = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


RAW_FORMATS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
}
_JSON_LIST_KEYS = ("data", "rows", "examples", "instances", "records", "items")
#: records per batch when streaming a file
BATCH_ROWS = 4096
#: read errors collected before the import stops listing them
MAX_READ_ISSUES = 1000
_INT64 = (-(2**63), 2**63 - 1)


@dataclass
class Raw:
    """One raw record and where it came from (``pos``: 0-based record number; ``line``: 1-based)."""

    pos: int
    data: dict[str, Any]
    line: int | None = None

    @property
    def where(self) -> str:
        return f"line {self.line}" if self.line is not None else f"row {self.pos}"


# ===================================================================================================
# stage 1: read
# ===================================================================================================
def raw_format(path: str | os.PathLike[str]) -> str:
    path = Path(path)
    fmt = RAW_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(
            f"unknown input format {path.suffix or '(no extension)'!r} for {path}: "
            f"expected one of {sorted(RAW_FORMATS)}"
        )
    return fmt


@dataclass
class Chunk:
    """A run of consecutive records: ``table`` (pyarrow's reading of them, or None where pyarrow
    cannot read them exactly as Python does) and :meth:`raw` (the same records as :class:`Raw`,
    read by Python: exact, with each record's line). Stages 2 and 4 use the table when they can and
    the records otherwise, so the table is only ever a faster route to the same result."""

    pos: int  # records before this chunk
    rows: int  # records in it
    table: Any = None
    _raw: Any = None  # list[Raw], or a function returning it
    line0: int | None = None  # JSONL with a table: the table's row i is on line line0 + i + 1

    def raw(self) -> list[Raw]:
        if callable(self._raw):
            self._raw = self._raw()
        return self._raw


class FileDigest:
    """The SHA-256 of an input file, taken by its reader from the bytes it reads (``whole``: it read
    every byte, in order, to the end), so that the manifest's hash of the input needs no second read
    of it. JSONL is read so; for the other formats ``whole`` stays False and the caller hashes the file."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.whole = False


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


def iter_raw(path: str | os.PathLike[str], batch_rows: int = BATCH_ROWS) -> Iterator[list[Raw]]:
    """Batches of :class:`Raw` records from a file (see :func:`iter_chunks` for the errors)."""
    for chunk in iter_chunks(path, batch_rows, arrow=False):
        recs = chunk.raw()
        for i in range(0, len(recs), batch_rows):
            yield recs[i:i + batch_rows]


def _record_chunks(records: Iterator[Raw], batch_rows: int) -> Iterator[Chunk]:
    batch: list[Raw] = []
    for rec in records:
        batch.append(rec)
        if len(batch) >= batch_rows:
            yield Chunk(batch[0].pos, len(batch), None, batch)
            batch = []
    if batch:
        yield Chunk(batch[0].pos, len(batch), None, batch)


#: JSONL bytes read (and parsed by pyarrow) at a time, in whole lines: memory is bounded by this
CHUNK_BYTES = 4 << 20


def _line_blocks(f: Any, chunk_bytes: int, feed=None) -> Iterator[bytes]:
    """The rest of the binary file ``f`` in blocks of whole lines of about ``chunk_bytes`` (a line
    longer than a block is read on to its end; the last block is what follows the last newline,
    possibly empty): the one block reader of the JSONL and CSV/TSV paths. Each block starts at a
    line: the part line after a block's last newline is read again with the next block (a seek back),
    so no block is the copy of a remainder joined to the next read. ``feed``: called with each block
    before it is yielded (the blocks in order are the file from where ``f`` stood)."""
    while True:
        block = f.read(chunk_bytes)
        cut = block.rfind(b"\n") + 1
        while not cut:  # no newline yet: one line longer than a block, read on to its end (or the file's)
            more = f.read(chunk_bytes)
            if not more:
                if feed is not None:
                    feed(block)
                yield block
                return
            end = more.rfind(b"\n") + 1
            cut = len(block) + end if end else 0
            block += more
        if cut < len(block):
            f.seek(cut - len(block), os.SEEK_CUR)
            block = block[:cut]
        if feed is not None:
            feed(block)
        yield block


def _jsonl_chunks(path: Path, issues: list[Issue], arrow: bool = True, digest: FileDigest | None = None) -> Iterator[Chunk]:
    chunk_bytes = CHUNK_BYTES  # (read when called: a test sets it small)
    pos = line0 = 0
    first = True
    with open(path, "rb") as f:
        for data in _line_blocks(f, chunk_bytes, digest.sha.update if digest is not None else None):
            if first and data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
            first = False
            if data:
                # one pass over the block for its brackets and its newlines (the depth check, the line count)
                skeleton = data.translate(None, _NOT_BRACKETS)
                lines = skeleton.count(b"\n") + (not data.endswith(b"\n"))
                table = _arrow_jsonl(data, lines, skeleton) if arrow else None
                recs = (lambda d=data, l0=line0, p0=pos: list(_jsonl_records(d, l0, p0, issues))) if table is not None \
                    else list(_jsonl_records(data, line0, pos, issues))
                chunk = Chunk(pos, table.num_rows if table is not None else len(recs), table, recs, line0)
                yield chunk
                pos += chunk.rows
                line0 += lines
    if digest is not None:
        digest.whole = True


def _arrow_jsonl(data: bytes, lines: int, skeleton: bytes) -> Any:
    """pyarrow's table of a block of JSONL lines, or None where Python must read it (pyarrow refuses
    it, a line is not one ``{...}`` (:func:`_lines_are_objects`), a byte is not UTF-8, a value nests
    deeply). pyarrow refuses a control byte in a string as Python does (checked), but does not check
    UTF-8 (so that is checked here).
    ``skeleton``: the block's brackets and newlines alone (``data.translate(None, _NOT_BRACKETS)``)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if _DEEP_OPEN.search(skeleton) is not None or not _lines_are_objects(data):
        return None
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=len(data) + 1))
        table.validate(full=True)  # the UTF-8 of every string: pyarrow's reader does not check it
    except (pa.ArrowException, ValueError, OverflowError):
        return None
    if table.num_rows != lines or any(_deeper_than(f.type, _ARROW_MAX_DEPTH) for f in table.schema):
        return None  # (a deep value: Python's reader decides, and names it if it is too deep)
    return table


def _lines_are_objects(data: bytes) -> bool:
    """Whether every line of a block starts with ``{`` and ends with ``}`` (before its ``\\n`` or
    ``\\r\\n``; a last line without a newline ends with ``}``). pyarrow reads a block as a stream of
    objects, not a line at a time: two objects on a line are two rows, an object over two lines is
    one, a blank line none, so a table with as many rows as the block has lines may still not be one
    row per line (a line of two objects beside a blank one). With every line ``{...}``, no object
    spans lines (a raw newline is never inside a JSON string, and ``}`` then ``{`` never inside one
    value) and none is blank: every line holds at least one object, and as many rows as lines is
    exactly one object per line. A line with spaces around its object fails this and goes to
    Python's reader. (numpy over the newlines: 3 ms for 4 MB, a quarter of ``bytes.count`` of the pairs.)"""
    import numpy as np

    a = np.frombuffer(data, dtype=np.uint8)
    if not a.size or a[0] != 0x7B or not data.endswith((b"\n", b"}")):
        return False
    nl = np.flatnonzero(a == 0x0A)  # (each >= 1: a[0] is "{")
    before = a[nl - 1]
    cr = before == 0x0D
    if cr.any():  # "}\r\n" (a "\r" right after the first "{" is no "}" either way)
        before = before.copy()
        before[cr] = a[nl[cr] - 2]
    return bool((before == 0x7D).all() and (a[nl[nl + 1 < a.size] + 1] == 0x7B).all())


#: nesting a block read by pyarrow may have; deeper values are read (and judged) by Python's reader
_ARROW_MAX_DEPTH = 32
#: a run of opening brackets deeper than that on one line (seen in the line's brackets alone, strings
#: included: a false alarm only sends the block to Python): pyarrow's type inference is quadratic in
#: the depth (35 s for 5000 levels), so such a block never reaches it
_DEEP_OPEN = re.compile(rb"[\[{]{%d}" % (_ARROW_MAX_DEPTH + 1))
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}\n")


def _deeper_than(t: Any, limit: int) -> bool:
    """Whether the pyarrow type ``t`` nests more than ``limit`` levels (iteratively: no recursion)."""
    todo = [(t, 1)]
    while todo:
        t, depth = todo.pop()
        if depth > limit:
            return True
        todo.extend((t.field(i).type, depth + 1) for i in range(t.num_fields))
    return False


def _jsonl_records(data: bytes, line0: int, pos: int, issues: list[Issue]) -> Iterator[Raw]:
    """Python's reading of a block of JSONL lines: each record with its line, each bad line an issue."""
    pieces = data.split(b"\n")
    last = len(pieces) - 1
    for i, raw in enumerate(pieces):
        if i == last and not raw:
            break
        lineno = line0 + i + 1
        if i < last:
            raw += b"\n"  # the line as the file holds it (a decoder's column numbers count it)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            issues.append(_line_issue(lineno, f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"))
            continue
        if not line.strip():
            continue
        try:
            obj = _loads(line)
        except json.JSONDecodeError as exc:
            issues.append(_line_issue(lineno, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        except ValueError as exc:
            issues.append(_line_issue(lineno, _json_value_error(exc)))
            continue
        except RecursionError:
            issues.append(_line_issue(lineno, _deep_message(line)))
            continue
        if not isinstance(obj, dict):
            issues.append(_line_issue(lineno, f"expected a JSON object, found {type(obj).__name__}"))
            continue
        yield Raw(pos, obj, lineno)
        pos += 1


def read_raw(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a raw data file into a list of dicts, choosing the reader by extension."""
    return [r.data for batch in iter_raw(path) for r in batch]


def _line_issue(line: int, message: str) -> Issue:
    return Issue(None, None, f"line {line}", message)


def _decoded_lines(path: Path, issues: list[Issue] | None, fmt: str = "", offset: int = 0,
                   line0: int = 0) -> Iterator[tuple[int, str]]:
    """(line number, text) per physical line (from byte ``offset``, which is line ``line0 + 1``),
    decoded one line at a time so that a bad byte is reported by its line and column, not by a
    decoder-chunk offset. With ``issues`` a bad line is recorded and skipped; without, it raises."""
    with open(path, "rb") as f:
        f.seek(offset)
        for lineno, raw in enumerate(f, start=line0 + 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                msg = f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
                if issues is None:
                    raise RecordError(f"cannot read {path} as {fmt}: line {lineno}: {msg}") from None
                issues.append(_line_issue(lineno, msg))


def _json_value_error(exc: ValueError) -> str:
    text = str(exc)
    if "integer string conversion" in text or "digits" in text:
        return "an integer too long to read (over 4300 digits)"
    return f"invalid JSON: {text}"


#: JSON tokens for :func:`_too_deep` (strings whole, possessively: linear on any input)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}:,]')
#: a value nested deeper than this is reported as too deep (Python's JSON reader stops near 1000)
MAX_JSON_DEPTH = 500


def _too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> str:
    """Where ``text`` (JSON that the reader refused with a RecursionError) first nests deeper than
    ``limit``: ``"field 'meta'"`` or ``"record 3, field 'meta'"``, for a one-line error."""
    stack: list[list] = []  # per open container: [kind, key or index, expecting a key]
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in "{[":
            stack.append(["o", None, True] if tok == "{" else ["l", 0, False])
            if len(stack) > limit:
                path = [f[1] for f in stack[:-1]]
                if path and isinstance(path[0], int) and len(path) > 1:  # a list of records (.json)
                    return f"record {path[0]}, field {path[1]!r}"
                return f"field {path[0]!r}" if path else "the document"
        elif tok in "]}":
            if stack:
                stack.pop()
        elif tok == ",":
            if stack and stack[-1][0] == "l":
                stack[-1][1] += 1
            elif stack:
                stack[-1][2] = True
        elif tok == ":":
            if stack:
                stack[-1][2] = False
        elif stack and stack[-1][0] == "o" and stack[-1][2]:
            try:
                stack[-1][1] = json.loads(tok)
            except ValueError:
                stack[-1][1] = tok
    return "the document"


def _deep_message(text: str) -> str:
    return f"{_too_deep(text)} is nested too deeply to read (over {MAX_JSON_DEPTH} levels of lists/objects)"


def _loads(text: str) -> Any:
    # Decimal keeps 1e400 and 0.1 exactly (a float turns them into inf and 0.1000000000000000055...)
    return json.loads(text, parse_float=Decimal)


def _iter_json(path: Path, issues: list[Issue], fmt: str) -> Iterator[Raw]:
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RecordError(f"cannot read {path} as json: line {line}: not UTF-8: byte 0x{data[exc.start]:02x} at column {col}") from None
    try:
        obj = _loads(text)
    except json.JSONDecodeError as exc:
        hint = " (one JSON object per line? name the file .jsonl)" if "Extra data" in exc.msg else ""
        raise RecordError(f"cannot read {path} as JSON: {exc}{hint}") from exc
    except RecursionError:
        raise RecordError(f"cannot read {path} as JSON: {_deep_message(text)}") from None
    except ValueError as exc:
        # (only where a run starts: tried at every digit, a file of 4000-digit runs took quadratic time)
        m = re.search(r"(?<!\d)\d{4301,}", text)
        where = f"line {text.count(chr(10), 0, m.start()) + 1}: " if m else ""
        raise RecordError(f"cannot read {path} as JSON: {where}{_json_value_error(exc)}") from None
    if isinstance(obj, dict):
        for k in _JSON_LIST_KEYS:
            if isinstance(obj.get(k), list):
                obj = obj[k]
                break
        else:
            raise RecordError(
                f"cannot read {path}: expected a JSON list of objects (or an object with one of "
                f"{list(_JSON_LIST_KEYS)} holding one), found an object with keys {sorted(obj)[:10]}"
            )
    if not isinstance(obj, list):
        raise RecordError(f"cannot read {path}: expected a JSON list of objects, found {type(obj).__name__}")
    bad = [Issue(i, None, "<record>", f"expected a JSON object, found {type(r).__name__}")
           for i, r in enumerate(obj) if not isinstance(r, dict)]
    if bad:
        raise RecordError(bad, header=f"cannot read {path}")
    for i, r in enumerate(obj):
        yield Raw(i, r)


def _iter_csv(path: Path, issues: list[Issue], fmt: str, offset: int = 0, line0: int = 0,
              header: list[str] | None = None, pos: int = 0) -> Iterator[Raw]:
    """Strict CSV/TSV: a quote that never closes, a stray quote or a row with more or fewer fields
    than the header is an error naming its line (the default reader would swallow or drop data).
    From byte ``offset`` (line ``line0 + 1``, record ``pos``) with ``header`` where the caller has
    read the start of the file."""
    delimiter = "\t" if fmt == "tsv" else ","
    line_of: list[int] = [line0]

    def lines() -> Iterator[str]:
        for lineno, text in _decoded_lines(path, None, fmt, offset, line0):
            line_of[0] = lineno
            yield text

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
    chunk_bytes = CHUNK_BYTES
    with open(path, "rb") as f:
        first = f.readline()
    plain_header = first.rstrip(b"\n")
    if plain_header.startswith(b"\xef\xbb\xbf"):
        plain_header = plain_header[3:]
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


# ===================================================================================================
# stage 2: map fields
# ===================================================================================================
def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str) and not value.strip():
        return True
    if isinstance(value, (list, tuple)) and len(value) == 0:
        return True
    return False


@dataclass
class ColumnStats:
    """What stage 2 needs to know about the columns, gathered in one pass over the records."""

    columns: dict[str, None] = field(default_factory=dict)  # ordered set
    present: dict[str, int] = field(default_factory=dict)  # non-missing values per column
    non_str: set[str] = field(default_factory=set)  # columns with a non-missing non-str value
    rows: int = 0

    def add(self, rec: Mapping[str, Any]) -> None:
        self.rows += 1
        for k, v in rec.items():
            k = str(k)
            self.columns.setdefault(k, None)
            if not _missing(v):
                self.present[k] = self.present.get(k, 0) + 1
                if not isinstance(v, str):
                    self.non_str.add(k)

    def add_table(self, table: Any) -> bool:
        """:meth:`add` for every row of a pyarrow table, column-wise; False (nothing added) where a
        column's type is one whose Python values could differ from Python's own reading (a
        timestamp pyarrow inferred from a string, say): the caller adds the records then."""
        import pyarrow as pa
        import pyarrow.compute as pc

        counts: dict[str, tuple[int, bool]] = {}
        for name, col in zip(table.column_names, table.columns):
            t = col.type
            if pa.types.is_null(t):
                counts[name] = (0, False)
            elif pa.types.is_string(t) or pa.types.is_large_string(t):
                # (missing = None or whitespace only, as Python's str.strip() sees it: checked in Python
                # for the few values pyarrow's length and space tests do not settle)
                n = len(col) - col.null_count
                if n:
                    blank = pc.or_(pc.equal(pc.binary_length(col), 0), pc.utf8_is_space(col))
                    n -= pc.sum(pc.fill_null(blank, False)).as_py() or 0
                    if n == 0 or not any(v is not None and v.strip() for v in col.slice(0, 64).to_pylist()):
                        n = sum(1 for v in col.to_pylist() if v is not None and v.strip())
                counts[name] = (n, False)
            elif pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_struct(t):
                counts[name] = (len(col) - col.null_count, True)
            elif pa.types.is_floating(t):
                counts[name] = (pc.sum(pc.fill_null(pc.invert(pc.is_nan(col)), False)).as_py() or 0, True)
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                counts[name] = (pc.sum(pc.fill_null(pc.greater(pc.list_value_length(col), 0), False)).as_py() or 0, True)
            else:
                return False
        self.rows += table.num_rows
        for name, (n, non_str) in counts.items():
            self.columns.setdefault(name, None)
            if n:
                self.present[name] = self.present.get(name, 0) + n
                if non_str:
                    self.non_str.add(name)
        return True

    def has_values(self, name: str) -> bool:
        return self.present.get(name, 0) > 0


def scan_columns(batches: Iterable[list[Raw]]) -> ColumnStats:
    stats = ColumnStats()
    for batch in batches:
        for r in batch:
            stats.add(r.data)
    return stats


@dataclass(frozen=True)
class FieldMap:
    """Which raw column feeds which record field (stage 2's result)."""

    question: str
    answer: str | None
    id: str | None
    difficulty: str | None = None
    family: str | None = None
    #: multiple choice: ``None``, ``"gpqa"`` (correct + incorrect answer columns) or ``"options"``
    choices: str | None = None
    options: str | None = None
    from_verl: bool = False

    def reads(self) -> set[str]:
        """The input columns a record field is made from (the others are not imported)."""
        if self.from_verl:
            return {"prompt", "reward_model", EXTRA_INFO, "data_source", "ability"}
        used = {self.question, self.answer, self.id, self.difficulty, self.family, self.options}
        if self.choices == "gpqa":
            used.update((GPQA_CORRECT, *GPQA_INCORRECT))
        return {c for c in used if c is not None}


def detect_fields(stats: ColumnStats, *, where: str, labeled: bool | str = True,
                  question_field: str | None = None, answer_field: str | None = None,
                  id_field: str | None = None) -> FieldMap:
    """The :class:`FieldMap` for columns seen in ``stats``; a :class:`RecordError` says what is missing."""
    columns = list(stats.columns)

    def named(name: str, what: str) -> str:
        if name not in stats.columns:
            raise RecordError(f"{what} field {name!r} not in {where}; columns found: {columns}")
        return name

    if question_field is not None:
        qf = named(question_field, "question")
    else:
        qf = next((n for n in QUESTION_FIELDS if stats.has_values(n) and n not in stats.non_str), None)
        if qf is None:
            raise RecordError(
                f"no question column detected in {where}: tried {list(QUESTION_FIELDS)} (string values), "
                f"columns found: {columns}; pass question_field= (--question-field)"
            )
    choices, options = None, None
    if GPQA_CORRECT in stats.columns and all(c in stats.columns for c in GPQA_INCORRECT):
        choices = "gpqa"
    else:
        options = next((n for n in CHOICE_FIELDS if stats.has_values(n) and n in stats.non_str and n != qf), None)
        choices = "options" if options else None

    if answer_field is not None:
        af: str | None = named(answer_field, "answer")
        if af == qf:
            raise RecordError(f"answer field and question field are both {qf!r}")
    else:
        candidates = (GPQA_CORRECT,) if choices == "gpqa" else CHOICE_ANSWER_FIELDS if choices else ANSWER_FIELDS
        af = next((n for n in candidates if n != qf and stats.has_values(n)), None)
        if af is None and labeled is True:
            raise RecordError(
                f"no answer column detected in {where} (labeled=True): tried {list(candidates)}, "
                f"columns found: {columns}; pass answer_field= (--answer-field), or import with "
                f"labeled='auto' or labeled=False"
            )
    if id_field:
        idf: str | None = named(id_field, "id")
    elif id_field is None:
        idf = next((n for n in ID_FIELDS if n not in (qf, af) and stats.has_values(n)), None)
    else:  # "": question hashes
        idf = None
    df = next((n for n in DIFFICULTY_FIELDS if stats.has_values(n)), None)
    ff = next((n for n in FAMILY_FIELDS if stats.has_values(n)), None)
    return FieldMap(qf, af, idf, df, ff, choices, options)


# ===================================================================================================
# stage 3: normalise
# ===================================================================================================
def _boxed_answer(text: str) -> str | None:
    """The boxed final answer, extracted exactly as the verifier extracts it (targets match predictions)."""
    from devenus.verify.extract import extract_answer

    got = extract_answer(text)
    return got.strip() if isinstance(got, str) and got.strip() else None


# Every pattern is linear in its input: possessive quantifiers (``++``) never give back what they
# matched, so a long digit run fails in one scan (``\d+\.?\d*`` tried every split of it: a 10 MB
# answer ran for minutes). The length limits below are checked before any of them runs anyway.
_NUMBER_WITH_COMMAS = re.compile(r"[-+]?+\d{1,3}+(?:,\d{3})++(?:\.\d++)?+")
_SCIENTIFIC = re.compile(r"[-+]?+(?:\d++(?:\.\d*+)?+|\.\d++)[eE][-+]?+\d++")
_NON_FINITE = re.compile(r"[-+]?+(?:inf|infinity|nan)", re.IGNORECASE)
#: a raw answer field longer than this is refused before it is searched for ``####`` or ``\boxed{}``
#: (a real solution text is a few kB; the verifier extracts at most ``max_answer_chars`` of it)
MAX_ANSWER_FIELD_CHARS = 100_000


def canonical_number(value: int | float | Decimal) -> str | None:
    """A number as the plain decimal string a model would write (``1e-07`` -> ``0.0000001``,
    ``42.0`` -> ``42``); None for a non-finite one."""
    if isinstance(value, int):
        return str(value)
    d = Decimal(repr(value)) if isinstance(value, float) else value
    if not d.is_finite():
        return None
    if d == d.to_integral_value():
        return str(int(d))
    text = format(d.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def reduce_answer(value: Any, field: str | None = None) -> tuple[str | None, str | None]:
    """The final target in a raw answer value, and why there is none.

    Returns ``(answer, None)`` or ``(None, reason)``. ``"... #### 1,234"`` -> ``"1234"``; text with a
    ``\\boxed{}`` -> the last box's content; a ``solution`` field without a box has no answer;
    numbers -> canonical decimal strings; a one-element list gives its element. Whether the target
    can be matched at all is :func:`unmatchable`'s question.
    """
    if isinstance(value, str):  # (the common case first)
        if len(value) > MAX_ANSWER_FIELD_CHARS:  # before strip, search or extraction touch it
            return None, f"{len(value)} characters (an answer field holds at most {MAX_ANSWER_FIELD_CHARS})"
        s = value.strip()
        return _reduce_text(s, field) if s else (None, "empty")
    if _missing(value):
        return None, "empty"
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return reduce_answer(value[0], field)
        return None, f"a list of {len(value)} answers (expected one)"
    if isinstance(value, Mapping):
        return None, "a dict (expected a str or a number)"
    if isinstance(value, bool):
        return str(value), None  # refused by unmatchable(): kept here so the refusal can show it
    if isinstance(value, (int, float, Decimal)):
        text = canonical_number(value)
        return (text, None) if text is not None else (str(value), None)
    return None, f"a {type(value).__name__} (expected a str or a number)"


def _reduce_text(s: str, field: str | None) -> tuple[str | None, str | None]:
    """:func:`reduce_answer` for a stripped, non-empty text."""
    if "####" in s:
        tail = s.rsplit("####", 1)[1].strip()
        if len(tail) <= _max_answer_chars() and _NUMBER_WITH_COMMAS.fullmatch(tail):
            tail = tail.replace(",", "")
        return (tail, None) if tail else (None, "nothing after '####'")
    if "\\boxed" in s or "\\fbox" in s:
        boxed = _boxed_answer(s)
        if boxed:
            return boxed, None
        if field in SOLUTION_FIELDS:
            return None, "its \\boxed{} does not close or is empty"
    if field in SOLUTION_FIELDS:
        return None, "no \\boxed{} final answer (or '####') in the solution"
    if len(s) > _max_answer_chars():
        return s, None  # refused by unmatchable() for its length, before any pattern runs on it
    if _SCIENTIFIC.fullmatch(s):
        try:
            return canonical_number(Decimal(s)) or s, None
        except InvalidOperation:
            pass
    return s, None


@functools.lru_cache(maxsize=1)
def _max_answer_chars() -> int:
    from devenus.verify.extract import DEFAULT_EXTRACT_CONFIG

    return DEFAULT_EXTRACT_CONFIG.max_answer_chars


def _braces_balanced(text: str) -> bool:
    if "{" not in text and "}" not in text:
        return True
    depth = 0
    for m in re.finditer(r"\\[\\{}]|[{}]", text):
        tok = m.group(0)
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def unmatchable(raw_value: Any, target: str) -> str | None:
    """Why no model answer can ever be graded equal to ``target`` (None when it can)."""
    if isinstance(raw_value, bool):
        return f"a bool ({raw_value}) is not an answer a model writes; map it to text (e.g. yes/no) first"
    if isinstance(raw_value, (float, Decimal)) and not (raw_value == raw_value and abs(raw_value) != math.inf):
        return f"a non-finite number ({raw_value})"
    limit = _max_answer_chars()
    if len(target) > limit:  # first: every check below is linear, but a 10 MB target needs none of them
        return f"{len(target)} characters; the verifier extracts answers of at most {limit}"
    if _NON_FINITE.fullmatch(target):
        return f"a non-finite number ({target!r})"
    if not _braces_balanced(target):
        return f"unbalanced braces in {target[:60]!r}"
    if "\\boxed" in target or "\\fbox" in target:
        return f"a \\boxed{{}} that does not close in {target[:60]!r}"
    return None


def normalise_target(value: Any, field: str | None) -> tuple[str | None, str | None, str | None]:
    """``(target, why_missing, refusal)``: the target, or why there is none, or why it is refused."""
    if isinstance(value, str) and len(value) > MAX_ANSWER_FIELD_CHARS:  # first: nothing else reads it
        return None, None, f"{len(value)} characters; an answer field holds at most {MAX_ANSWER_FIELD_CHARS}"
    target, why = reduce_answer(value, field)
    if target is None:
        return None, why, None
    refused = unmatchable(value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value, target)
    return (None, None, refused) if refused else (target, None, None)


def normalize_question(text: str) -> str:
    """Text used for hash keys: NFKC, whitespace runs collapsed to one space, ends stripped."""
    if text.isascii():  # ASCII is NFKC already; printable ASCII has no whitespace but " "
        if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
            return text  # (what the split and join below would give, in one scan)
    else:
        text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split())


def question_hash(text: str) -> str:
    """``sha1(normalize_question(text))[:16]``."""
    return hashlib.sha1(normalize_question(text).encode("utf-8")).hexdigest()[:16]


def _id_str(value: Any) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (float, Decimal)):
        return canonical_number(value) if value == value else None
    if isinstance(value, (str, int)):
        return str(value).strip()
    return None


def _difficulty(value: Any) -> int | None:
    if _missing(value) or isinstance(value, bool):
        return None
    if isinstance(value, (float, Decimal)):
        if not (value == value and abs(value) != math.inf) or value != int(value):
            return None
        value = int(value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"expected a difficulty that fits in 64 bits, found an integer of {len(str(abs(value)))} digits")
        return value
    if isinstance(value, str):
        if len(value) > 64:  # "Level 5" or " 3 ": a longer text is no difficulty, and is not searched
            return None
        m = re.fullmatch(r"\s*+(?:level\s*+)?+([-+]?+\d{1,18}+)\s*+", value, flags=re.IGNORECASE)
        return int(m.group(1)) if m else None
    return None


def _family(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


class KeyBuilder:
    """``extra_info.index`` for each record in file order: from the id column, or the question hash
    with ``-2``, ``-3``, ... for repeats. Keeps one small entry per row (ids / hash counts)."""

    def __init__(self, source: str, id_field: str | None):
        self.source, self.id_field = source, id_field
        self.seen_ids: dict[str, int] = {}
        self.hash_counts: dict[str, int] = {}

    def key(self, rec: Raw, question: str) -> tuple[str | None, Issue | None]:
        if self.id_field is not None:
            raw_id = _id_str(rec.data.get(self.id_field))
            if raw_id is None:
                return None, Issue(rec.pos, None, self.id_field,
                                   f"expected an id (str or int), found {rec.data.get(self.id_field)!r:.60}{_at(rec)}")
            if raw_id in self.seen_ids:
                return None, Issue(rec.pos, None, self.id_field,
                                   f"expected a unique id, found {raw_id!r} again (first in row {self.seen_ids[raw_id]}){_at(rec)}")
            return self.id_key(raw_id, rec.pos), None
        return self.hash_key(question), None

    def id_key(self, raw_id: str, pos: int) -> str:
        self.seen_ids[raw_id] = pos
        return f"{self.source}/{raw_id}"

    def hash_key(self, question: str) -> str:
        return self.hash_key_of(question_hash(question))

    def hash_key_of(self, h: str) -> str:
        """The key of a question whose :func:`question_hash` is ``h``."""
        n = self.hash_counts.get(h, 0) + 1
        self.hash_counts[h] = n
        return f"{self.source}/{h}" if n == 1 else f"{self.source}/{h}-{n}"

    def hash_keys(self, hashes: list[str]) -> Any:
        """:meth:`hash_key_of` of each hash in order, as a pyarrow string array: joined column-wise
        where no hash repeats (within ``hashes`` or with an earlier one), else one by one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        new = dict.fromkeys(hashes, 1)
        if len(new) == len(hashes) and self.hash_counts.keys().isdisjoint(new):
            self.hash_counts.update(new)
            return pc.binary_join_element_wise(f"{self.source}/", pa.array(hashes, pa.string()), "")
        return pa.array([self.hash_key_of(h) for h in hashes], pa.string())


class Deduper:
    """``dedupe="exact"``: a record whose prompt and target repeat an earlier record's exactly is
    dropped (the first is kept, with the key it has without deduplication); the same prompt with
    another target is a *conflict*: kept as a row of its own (its own key) and reported, since which
    target is right is not the importer's to decide. Keeps one digest per distinct prompt/target."""

    MAX_LISTED = 20

    def __init__(self) -> None:
        self.first: dict[bytes, dict[bytes, str]] = {}  # prompt digest -> {target digest: where first}
        self.duplicates = 0
        self.conflicts = 0
        self.listed: list[str] = []

    @staticmethod
    def _digest(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()

    def repeat(self, prompt: str, target: str | None, where: str) -> bool:
        """Whether this record repeats an earlier one exactly (then it is left out)."""
        p = self._digest(prompt)
        t = b"" if target is None else b"=" + self._digest(target)
        seen = self.first.get(p)
        if seen is None:
            self.first[p] = {t: where}
            return False
        if t in seen:
            self.duplicates += 1
            return True
        self.conflicts += 1
        if len(self.listed) < self.MAX_LISTED:
            first_where = next(iter(seen.values()))
            self.listed.append(f"{where}: the prompt of {first_where} with another target ({target!r:.40})")
        seen[t] = where
        return False


def _at(rec: Raw) -> str:
    return f" ({rec.where})" if rec.line is not None else ""


LETTERS = string.ascii_uppercase


def _choice_texts(value: Any) -> tuple[list[str], list[str]] | None:
    """(option texts, their own labels) from a list of texts or ARC's ``{"text": [...], "label": [...]}``."""
    if isinstance(value, Mapping) and isinstance(value.get("text"), list):
        texts = [str(t) for t in value["text"]]
        labels = value.get("label") if isinstance(value.get("label"), list) else list(LETTERS[: len(texts)])
        return texts, [str(x) for x in labels]
    if isinstance(value, list) and value and all(isinstance(t, (str, int, float, Decimal)) for t in value):
        texts = [str(t) for t in value]
        return texts, list(LETTERS[: len(texts)])
    return None


def choice_question(fm: FieldMap, rec: Raw, question: str) -> tuple[str, list[str], Any] | str:
    """(question with lettered options, option texts, raw answer as a letter or None), or why not."""
    d = rec.data
    if fm.choices == "gpqa":
        correct = d.get(GPQA_CORRECT)
        wrong = [d.get(c) for c in GPQA_INCORRECT]
        opts = [str(o).strip() for o in [correct, *wrong] if not _missing(o)]
        if _missing(correct):
            texts = opts
            answer = None
        else:
            # a fixed shuffle per question, so the correct option is not always (A)
            random.Random(question_hash(question)).shuffle(opts)
            texts, answer = opts, LETTERS[opts.index(str(correct).strip())]
    else:
        got = _choice_texts(d.get(fm.options))
        if got is None:
            return f"expected a list of options, found {d.get(fm.options)!r:.60}"
        texts, labels = got
        if len(texts) > len(LETTERS):
            return f"{len(texts)} options (at most {len(LETTERS)})"
        raw = d.get(fm.answer) if fm.answer else None
        answer = None
        if not _missing(raw):
            if isinstance(raw, (int, Decimal, float)) and not isinstance(raw, bool):
                i = int(raw)
                answer = LETTERS[i] if 0 <= i < len(texts) and i == raw else None
            else:
                s = str(raw).strip()
                if s in labels:
                    answer = LETTERS[labels.index(s)]
                elif len(s) == 1 and s.upper() in LETTERS[: len(texts)]:
                    answer = s.upper()
                elif s in texts:
                    answer = LETTERS[texts.index(s)]
            if answer is None:
                return f"answer {raw!r:.40} is none of the {len(texts)} options' labels, letters or texts"
    lettered = question + "\n\n" + "\n".join(f"{LETTERS[i]}. {t}" for i, t in enumerate(texts))
    return lettered, texts, answer


# ===================================================================================================
# stage 4: validate (one record)
# ===================================================================================================
#: the values of ``dedupe``
DEDUPE_MODES = (None, "exact")


@dataclass(frozen=True)
class ImportOptions:
    """The settings of one import (the arguments of :func:`import_raw`)."""

    source: str
    data_source: str | None = None
    split: str = "train"
    labeled: bool | str = True
    question_field: str | None = None
    answer_field: str | None = None
    id_field: str | None = None
    ability: str | None = None
    system_prompt: str | None = None
    prompt_template: str | None = None
    hidden_answers: bool = True
    from_verl: bool = False
    #: None (every record is a row) or "exact": exact repeats of a prompt and its target collapsed
    dedupe: str | None = None
    #: a registered format's name, a format file or a PromptFormat (None: "plain"); system_prompt and
    #: prompt_template, when given, replace its system text and instruction
    prompt_format: str | os.PathLike[str] | PromptFormat | None = None

    @functools.cached_property
    def format(self) -> tuple[str, PromptFormat]:
        """``(name, format)`` the prompts are built by (system_prompt / prompt_template applied)."""
        name, fmt = prompt_format(self.prompt_format)
        # (an empty system_prompt is none, as it always was)
        return name, fmt.replace(system=self.system_prompt or None, instruction=self.prompt_template)

    def check(self) -> None:
        if self.dedupe not in DEDUPE_MODES:
            raise ValueError(f"dedupe must be one of {list(DEDUPE_MODES)}, got {self.dedupe!r}")
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError(f"source must be a non-empty str, got {self.source!r}")
        if self.labeled not in (True, False, "auto"):
            raise ValueError(f"labeled must be True, False or 'auto', got {self.labeled!r}")
        if self.prompt_template is not None and "{question}" not in self.prompt_template:
            raise ValueError("prompt_template must contain the placeholder '{question}'")
        if self.from_verl and (self.prompt_template is not None or self.system_prompt is not None
                               or self.prompt_format is not None):
            raise ValueError("a verl file's prompt is used as it is: --prompt-format, --prompt-template and "
                             "--system-prompt do not apply with --from-verl")
        if not self.from_verl:
            self.format  # noqa: B018  (an unknown name or a bad file fails here, before any input is read)
        if self.from_verl and (self.question_field or self.answer_field):
            raise ValueError("--from-verl reads prompt[-1].content and reward_model.ground_truth; --question-field/--answer-field do not apply")

    def config(self) -> dict[str, Any]:
        """What the manifest records (JSON values)."""
        cfg = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if cfg["dedupe"] is None:  # (absent when off: an import without it has the manifest it always had)
            del cfg["dedupe"]
        if self.from_verl:
            del cfg["prompt_format"]
        else:  # the format by name and by content: the same name may hold other texts (a file edited)
            name, fmt = self.format
            cfg["prompt_format"] = {"name": name, "sha256": fmt.sha256()}
        return cfg


@dataclass
class Outcome:
    """What stage 4 made of one record: a row, a refusal, or an issue (fatal for the import)."""

    row: dict[str, Any] | None = None
    refusal: Refusal | None = None
    issue: Issue | None = None
    hidden: bool = False


def _label_state(opts: ImportOptions, rec: Raw, key: str, field_name: str | None, value: Any,
                 answer: str | None = None, checked: bool = False) -> tuple[bool, str, dict | None, Outcome | None]:
    """(labeled, target, simulation, early outcome) by the label mode."""
    if checked:
        target, why, refused = answer, (None if answer is not None else "empty"), None
    elif field_name is None:
        target, why, refused = None, "no answer column", None
    else:
        target, why, refused = normalise_target(value, field_name)
    if refused:
        return False, "", None, Outcome(refusal=Refusal(rec.where, field_name or "<answer>", refused, key))
    if target is not None and opts.labeled is not False:
        return True, target, None, None
    if target is None and opts.labeled is True:
        return False, "", None, Outcome(issue=Issue(
            rec.pos, key, field_name or "<answer>",
            f"no answer ({why}) but labeled=True; use labeled='auto' to import such rows as unlabeled{_at(rec)}"))
    sim = {"hidden_answer": target, "noise": "none"} if target is not None and opts.hidden_answers else None
    return False, "", sim, None


def build_record(rec: Raw, fm: FieldMap, opts: ImportOptions, keys: KeyBuilder) -> Outcome:
    """Stage 4 for a plain or multiple-choice record."""
    q = rec.data.get(fm.question)
    if _missing(q) or not isinstance(q, str):
        return Outcome(issue=Issue(rec.pos, None, fm.question,
                                   f"expected a non-empty question str, found {type(q).__name__} {q!r:.60}{_at(rec)}"))
    question = q.strip()
    key, issue = keys.key(rec, question)
    if issue is not None:
        return Outcome(issue=issue)
    extra: dict[str, Any] = {"view": "original", "pair_key": None, "question": question}
    try:
        extra["difficulty"] = _difficulty(rec.data.get(fm.difficulty)) if fm.difficulty else None
    except ValueError as exc:
        return Outcome(issue=Issue(rec.pos, key, fm.difficulty or "", f"{exc}{_at(rec)}"))
    extra["family"] = _family(rec.data.get(fm.family)) if fm.family else None
    if fm.choices:
        got = choice_question(fm, rec, question)
        if isinstance(got, str):
            return Outcome(refusal=Refusal(rec.where, fm.options or GPQA_CORRECT, got, key))
        content, texts, letter = got
        extra["choices"] = texts
        labeled, target, sim, early = _label_state(opts, rec, key, fm.answer, None, letter, checked=True)
    else:
        content = question
        labeled, target, sim, early = _label_state(opts, rec, key, fm.answer, rec.data.get(fm.answer) if fm.answer else None)
    if early is not None:
        return early
    row = make_row(
        data_source=opts.data_source or opts.source, index=key, source=opts.source,
        prompt=opts.format[1].messages(content, choice=bool(fm.choices)), ground_truth=target, labeled=labeled,
        split=opts.split, ability=opts.ability or "math", extra=extra, simulation=sim, validate=False,
    )
    return Outcome(row=row, hidden=sim is not None)


def _is_text(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _never_text(t: Any) -> bool:
    """Whether no value of the pyarrow type ``t`` is a str in Python's reading of the record, from any
    source (not a timestamp: pyarrow infers one from a date in JSON, where Python reads the string;
    not a dictionary: a category's values may be strings)."""
    import pyarrow as pa

    return (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_list(t)
            or pa.types.is_large_list(t) or pa.types.is_struct(t))


def _column(table: Any, name: str | None, ok) -> Any:
    """A column as one pyarrow array where its type passes ``ok``; None where the chunk lacks it or
    it holds only nulls; False where its type does not pass."""
    import pyarrow as pa

    if name is None or name not in table.column_names:
        return None
    col = table.column(name)
    if pa.types.is_null(col.type):
        return None
    return col.combine_chunks() if ok(col.type) else False


def _per_value(values: Any, f, type_: Any) -> Any:
    """``f`` of every value of a pyarrow array as an array of ``type_``: ``f`` runs once per distinct
    value (a column of levels or subjects holds a few) and pyarrow spreads the results; a null
    stays null (``f(None)`` is None for every ``f`` given here)."""
    import pyarrow as pa

    enc = values.dictionary_encode()
    return pa.array([f(v) for v in enc.dictionary.to_pylist()], type_).take(enc.indices)


def _python_targets(values: list, field: str) -> list[str | None] | None:
    """:func:`normalise_target` of each value (None for the whole list where one is refused: the
    per-record route names it)."""
    out = []
    for v in values:
        target, _, refused = normalise_target(v, field)
        if refused:
            return None
        out.append(target)
    return out


def _scatter(n: int, parts: list[tuple[Any, Any]]) -> Any:
    """One array of ``n`` values from parts ``(row numbers, values)`` that together cover every row once."""
    import numpy as np
    import pyarrow as pa

    if len(parts) == 1:
        return parts[0][1]  # (its row numbers are 0..n-1 in order)
    where = np.empty(n, dtype=np.int64)
    start = 0
    for rows, values in parts:
        where[rows] = np.arange(start, start + len(values))
        start += len(values)
    return pa.concat_arrays([values for _, values in parts]).take(pa.array(where))


def _question_hashes(qs: Any) -> list[str]:
    """:func:`question_hash` of every (stripped) question of a string array: a question of printable
    ASCII without a double space is its own normal form (pyarrow finds them column-wise) and is
    hashed from the array's own bytes; the others are normalised one by one."""
    import numpy as np
    import pyarrow.compute as pc

    offsets = np.frombuffer(qs.buffers()[1], dtype=np.int32)[qs.offset:qs.offset + len(qs) + 1]
    data = memoryview(qs.buffers()[2] or b"")
    text = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]]  # every value's bytes, in a row
    space = text == 0x20
    if text.size and (text.min() < 0x20 or text.max() > 0x7E or (space[1:] & space[:-1]).any()):
        # some question is not printable ASCII or has a double space somewhere: find which, row by
        # row (ascii_is_printable: 0x20-0x7e, as str.isprintable() on ASCII; RE2 finds "  " several
        # times faster than match_substring)
        odd = pc.indices_nonzero(pc.or_(pc.invert(pc.and_(pc.string_is_ascii(qs), pc.ascii_is_printable(qs))),
                                        pc.match_substring_regex(qs, "  "))).to_pylist()
    else:
        odd = []  # (the values are stripped: no pair of spaces straddles two of them)
    offsets = offsets.tolist()
    sha1 = hashlib.sha1
    out = [sha1(data[a:b]).hexdigest()[:16] for a, b in zip(offsets, offsets[1:])]
    for i in odd:
        out[i] = question_hash(qs[i].as_py())
    return out


def _column_targets(col: Any, field: str) -> Any:
    """:func:`normalise_target` of every value of a text column, as a string array (null: no
    target), or None where one is refused. Column-wise for the common answer ``"... #### 42"`` whose
    tail is ASCII without braces or a backslash (there :func:`_reduce_text` and :func:`unmatchable`
    reduce to a length check, a comma pattern and a non-finite pattern, run by pyarrow's RE2: no
    backtracking); every other value goes through :func:`normalise_target` itself. Lengths are
    checked before anything searches a value (in bytes first: a text has at least as many bytes as
    characters, so characters are counted only past the limit in bytes)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def longer(arr: Any, limit: int) -> bool:
        return (pc.max(pc.binary_length(arr)).as_py() or 0) > limit and (pc.max(pc.utf8_length(arr)).as_py() or 0) > limit

    col = pc.cast(col, pa.string())
    if longer(col, MAX_ANSWER_FIELD_CHARS):
        return None  # (the per-record route names it, before any search)
    n = len(col)
    marked = pc.fill_null(pc.match_substring_regex(col, "####"), False)  # (RE2: far faster than match_substring)
    idx = pc.indices_nonzero(marked)
    simple = np.zeros(n, dtype=bool)
    parts = []
    if len(idx):
        texts = col if len(idx) == n else col.take(idx)
        tails = pc.utf8_trim(pc.list_element(pc.split_pattern(texts, "####", max_splits=1, reverse=True), 1),
                             characters=PY_WHITESPACE)
        if longer(tails, _max_answer_chars()):
            return None  # a target longer than the verifier extracts: refused
        plain = pc.and_(pc.string_is_ascii(tails), pc.invert(pc.match_substring_regex(tails, r"[{}\\]")))
        if pc.any(pc.and_(plain, pc.match_substring_regex(tails, r"^[-+]?(?:inf|infinity|nan)$", ignore_case=True))).as_py():
            return None  # a non-finite number: refused
        commas = pc.match_substring_regex(tails, r"^[-+]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?$")
        tails = pc.filter(pc.if_else(commas, pc.replace_substring(tails, ",", ""), tails), plain)
        rows = idx.to_numpy()[plain.to_numpy(zero_copy_only=False)]
        simple[rows] = True
        # (nothing after '####': no target)
        parts.append((rows, pc.if_else(pc.equal(pc.binary_length(tails), 0), pa.scalar(None, pa.string()), tails)))
    rest = np.flatnonzero(~simple)  # (only these are read into Python)
    if rest.size:
        targets = _python_targets(col.take(pa.array(rest)).to_pylist(), field)
        if targets is None:
            return None
        parts.append((rest, pa.array(targets, pa.string())))
    return _scatter(n, parts)


def fast_rows(chunk: Chunk, fm: FieldMap, opts: ImportOptions, keys: KeyBuilder,
              dedupe: Deduper | None = None) -> tuple[Any, int, Any] | None:
    """Stage 4 for a whole chunk at once, from pyarrow's table: ``(records table, hidden answers,
    each row's record number)`` with exactly the rows :func:`build_record` makes, or None (nothing
    changed) where any record needs more than the plain route: an error, a refusal, a type Python
    would read otherwise (a float: Python keeps it as a Decimal), multiple choice, verl's layout.
    The caller then builds the chunk's records one by one; so every check is the per-record one,
    and this is only faster. Every step is a pyarrow operation over the chunk's columns but one
    SHA-1 per question key (and, with ``dedupe``, one digest per record)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .schema import records_schema

    table = chunk.table
    if table is None or fm.choices or fm.from_verl:
        return None
    n = table.num_rows
    qcol = table.column(fm.question) if fm.question in table.column_names else None
    if qcol is None or not _is_text(qcol.type) or qcol.null_count:
        return None
    text_or_int = lambda t: _is_text(t) or pa.types.is_integer(t)  # noqa: E731
    answers = _column(table, fm.answer, text_or_int)
    ids = _column(table, fm.id, text_or_int)
    diffs = _column(table, fm.difficulty, text_or_int)
    category = lambda t: pa.types.is_dictionary(t) and _is_text(t.value_type)  # noqa: E731
    fams = _column(table, fm.family, lambda t: _is_text(t) or category(t) or _never_text(t))
    if answers is False or ids is False or diffs is False or fams is False:
        return None  # (a family pyarrow typed that Python may read as text: a date in JSON)
    if fm.id is not None and ids is None:
        return None  # an id column without a value in this chunk: the per-record route names every row
    if fams is not None and category(fams.type):
        fams = pc.cast(fams, pa.string())  # (a category column: Python reads each value's text)
    string = pa.string()
    # column-wise, each as the per-record route computes it (str.strip() is utf8_trim of the very
    # characters str.isspace() names; a value no column operation reproduces exactly goes through
    # the per-record function)
    qs = pc.cast(pc.utf8_trim(qcol.combine_chunks(), characters=PY_WHITESPACE), string)
    if (pc.min(pc.binary_length(qs)).as_py() or 0) == 0:
        return None  # an empty question: the per-record route names it
    if answers is None:
        targets = pa.nulls(n, string)
    elif _is_text(answers.type):
        targets = _column_targets(answers, fm.answer)
        if targets is None:
            return None  # a refused answer
    else:  # an integer's target is its decimal text (canonical_number), never refused
        targets = pc.cast(answers, string)
    if opts.labeled is True and targets.null_count:
        return None
    try:
        difficulty = _per_value(diffs, _difficulty, pa.int64()) if diffs is not None else pa.nulls(n, pa.int64())
    except ValueError:
        return None
    # (a family whose values are never text is None in every row)
    family = _per_value(fams, _family, string) if fams is not None and _is_text(fams.type) else pa.nulls(n, string)
    if ids is not None:  # (_id_str column-wise: a text trimmed, an integer as its decimal text)
        ids = pc.utf8_trim(pc.cast(ids, string), characters=PY_WHITESPACE) if _is_text(ids.type) else pc.cast(ids, string)
        if ids.null_count or (pc.min(pc.binary_length(ids)).as_py() or 0) == 0 \
                or pc.count_distinct(ids).as_py() < n:
            return None  # a missing or repeated id: the per-record route names it
        id_list = ids.to_pylist()
        if not keys.seen_ids.keys().isdisjoint(id_list):
            return None
    hashes = _question_hashes(qs) if ids is None else None

    # every record is a plain row: now the repeats (dedupe) and the keys, in file order
    keep: Any = range(n)
    if dedupe is not None:
        questions, tlist, line0 = qs.to_pylist(), targets.to_pylist(), chunk.line0
        keep = [i for i in range(n) if not dedupe.repeat(
            questions[i], tlist[i], f"line {line0 + i + 1}" if line0 is not None else f"row {chunk.pos + i}")]
    if ids is not None:
        kept = id_list if len(keep) == n else [id_list[i] for i in keep]
        keys.seen_ids.update(zip(kept, (chunk.pos + i for i in keep)))
        index = pc.binary_join_element_wise(f"{keys.source}/", pa.array(kept, string), "")
    else:
        index = keys.hash_keys(hashes if len(keep) == n else [hashes[i] for i in keep])
    if len(keep) < n:
        rows = pa.array(keep, pa.int64())
        targets, difficulty, family, qs = (v.take(rows) for v in (targets, difficulty, family, qs))
    m = len(keep)
    if opts.labeled is False:  # every row unlabeled; the answers kept as hidden ones (unless not)
        labeled = pa.array(np.zeros(m, dtype=bool))
        ground_truth = pa.repeat(pa.scalar("", string), m)
        hidden = targets if opts.hidden_answers else pa.nulls(m, string)
    else:  # labeled iff there is a target (labeled=True: every row has one, checked above)
        labeled = pc.is_valid(targets)
        ground_truth = pc.fill_null(targets, "")
        hidden = pa.nulls(m, string)

    schema = records_schema()
    fmt = opts.format[1]
    template = fmt.template()
    # template.replace("{question}", q) for every q: the template's pieces joined with the question
    # (PromptFormat.check: the template has the placeholder)
    pieces = template.split("{question}")
    users = pc.binary_join_element_wise(*[x for piece in pieces[:-1] for x in (piece, qs)], pieces[-1], "")
    msg_type = schema.field("prompt").type.value_type
    # as PromptFormat.messages: the format's fixed messages (system, worked turns), then each row's question;
    # row i's contents are prefix[0..k-1] and users[i], taken from one array [*prefix, *users]
    prefix = fmt.prefix(template)
    k = len(prefix)
    step = k + 1
    if k:
        roles = pa.array([p["role"] for p in prefix] + ["user"], string).take(pa.array(np.tile(np.arange(step), m)))
        at = np.tile(np.arange(step, dtype=np.int64), m)
        at[k::step] = k + np.arange(m)
        contents = pa.concat_arrays([pa.array([p["content"] for p in prefix], string), users]).take(pa.array(at))
    else:  # (one message a row: the user texts as they are, not copied by a take)
        roles, contents = pa.repeat(pa.scalar("user", string), m), users
    messages = pa.StructArray.from_arrays([roles, contents], fields=list(msg_type))
    prompt = pa.ListArray.from_arrays(pa.array(np.arange(0, step * m + 1, step, dtype=np.int32)), messages,
                                      type=schema.field("prompt").type)

    def const(v: Any) -> Any:
        return pa.repeat(pa.scalar(v, string), m)

    reward_model = pa.StructArray.from_arrays([const("rule"), ground_truth], fields=list(schema.field("reward_model").type))
    ei_type = schema.field(EXTRA_INFO).type
    ei_values = {
        "index": index, "labeled": labeled, "label_source": pc.if_else(labeled, "gold", "none"),
        "source": const(opts.source), "split": const(opts.split), "difficulty": difficulty,
        "family": family, "view": const("original"), "pair_key": const(None), "question": qs,
    }
    extra_info = pa.StructArray.from_arrays([ei_values[f.name] for f in ei_type], fields=list(ei_type))
    simulation = pa.StructArray.from_arrays([hidden, const("none")], fields=list(schema.field("simulation").type),
                                            mask=pc.is_null(hidden))
    out = pa.Table.from_arrays(
        [const(opts.data_source or opts.source), prompt, const(opts.ability or "math"), reward_model, extra_info,
         simulation], schema=schema)
    return out, m - hidden.null_count, range(chunk.pos, chunk.pos + n) if m == n else [chunk.pos + i for i in keep]


_VERL_TAKEN = set(EXTRA_INFO_REQUIRED) | {"question"}


@dataclass(frozen=True)
class VerlPlan:
    """How a verl Parquet file's ``extra_info`` maps to ours, decided once from its schema so that
    every batch carries the same keys with the same types: ``keys`` (kept), ``renamed`` (standard
    keys of another type, kept as ``verl_<key>``), ``style`` (some reward style is not ``rule``)."""

    keys: tuple[str, ...]
    renamed: frozenset[str]
    style: bool
    schema: Any  # the records schema the version is written with

    @classmethod
    def of(cls, path: Path) -> "VerlPlan | None":
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from .schema import records_schema

        if path.suffix.lower() not in (".parquet", ".pq"):
            return None
        try:
            file_schema = pq.read_schema(path)
            style = False
            if "reward_model" in file_schema.names and "style" in [f.name for f in file_schema.field("reward_model").type]:
                col = pq.read_table(path, columns=["reward_model"])["reward_model"]
                styles = pc.struct_field(col, "style")
                style = bool(pc.any(pc.not_equal(styles, "rule")).as_py())
        except (pa.ArrowException, OSError) as exc:
            raise RecordError(f"cannot read {path} as parquet: {exc}") from exc
        if EXTRA_INFO not in file_schema.names or not pa.types.is_struct(file_schema.field(EXTRA_INFO).type):
            return cls((), frozenset(), style, None)
        std = {str: pa.string(), int: pa.int64(), bool: pa.bool_(), float: pa.float64()}
        fields = [f for f in file_schema.field(EXTRA_INFO).type if f.name not in _VERL_TAKEN]
        renamed = frozenset(f.name for f in fields if f.name in EXTRA_INFO_OPTIONAL
                            and not f.type.equals(std[EXTRA_INFO_OPTIONAL[f.name]]) and not pa.types.is_null(f.type))
        extras = {(f"verl_{f.name}" if f.name in renamed else f.name): f.type for f in fields
                  if f.name not in EXTRA_INFO_OPTIONAL or f.name in renamed}
        if style:
            extras["verl_reward_style"] = pa.string()
        return cls(tuple(f.name for f in fields), renamed, style, records_schema(extras))


def build_verl_record(rec: Raw, opts: ImportOptions, keys: KeyBuilder, plan: VerlPlan | None = None) -> Outcome:
    """Stage 4 for a row in verl's layout: the prompt as it is, ``reward_model.ground_truth`` as the
    target, ``extra_info.index`` (int or str) as the id; other ``extra_info`` keys kept as metadata."""
    d = rec.data
    prompt = d.get("prompt")
    if not isinstance(prompt, list) or not prompt or not all(isinstance(m, Mapping) for m in prompt):
        return Outcome(issue=Issue(rec.pos, None, "prompt", f"expected a list of chat messages, found {prompt!r:.60}"))
    messages = [{"role": m.get("role"), "content": m.get("content")} for m in prompt]
    users = [m["content"] for m in messages if m["role"] == "user" and isinstance(m["content"], str)]
    ei = d.get(EXTRA_INFO) if isinstance(d.get(EXTRA_INFO), Mapping) else {}
    question = ei.get("question") if isinstance(ei.get("question"), str) and ei.get("question").strip() else (users[-1] if users else None)
    if not question:
        return Outcome(issue=Issue(rec.pos, None, "prompt", "expected a user message with text, found none"))
    key, issue = keys.key(Raw(rec.pos, {"extra_info.index": ei.get("index")}, rec.line), question)
    if issue is not None:
        return Outcome(issue=issue)
    rm = d.get("reward_model") if isinstance(d.get("reward_model"), Mapping) else {}
    labeled, target, sim, early = _label_state(opts, rec, key, "reward_model.ground_truth", rm.get("ground_truth"))
    if early is not None:
        return early
    extra: dict[str, Any] = {"view": "original", "pair_key": None, "question": question.strip()}
    style = rm.get("style")
    if plan is not None:  # Parquet: the same keys in every row (None where a row has none)
        for k in plan.keys:
            extra[f"verl_{k}" if k in plan.renamed else k] = ei.get(k)
        if plan.style:
            extra["verl_reward_style"] = style if style != "rule" else None
    else:
        for k, v in ei.items():
            if k in _VERL_TAKEN or v is None:
                continue
            t = EXTRA_INFO_OPTIONAL.get(k)
            if t is not None and not (isinstance(v, t) and not isinstance(v, bool)):
                k = f"verl_{k}"  # a standard key with another type: kept under another name, not lost
            extra[k] = float(v) if isinstance(v, Decimal) else v
        if isinstance(style, str) and style != "rule":
            extra["verl_reward_style"] = style
    split = ei.get("split") if isinstance(ei.get("split"), str) and ei.get("split").strip() else opts.split
    ds = opts.data_source or (d.get("data_source") if isinstance(d.get("data_source"), str) and d.get("data_source").strip() else opts.source)
    ab = opts.ability or (d.get("ability") if isinstance(d.get("ability"), str) and d.get("ability").strip() else "math")
    row = make_row(data_source=ds, index=key, source=opts.source, prompt=messages, ground_truth=target,
                   labeled=labeled, split=split, ability=ab, extra=extra, simulation=sim, validate=False)
    return Outcome(row=row, hidden=sim is not None)


# ===================================================================================================
# the pipeline
# ===================================================================================================
@dataclass(frozen=True)
class ImportSummary:
    """What an import detected and produced (``refusals``: rows left out, with why)."""

    input: str
    rows: int
    labeled: int
    unlabeled: int
    hidden_answers: int
    question_field: str
    answer_field: str | None
    id_field: str | None
    refusals: tuple[Refusal, ...] = ()
    choices: str | None = None
    from_verl: bool = False
    read: int = 0  # records read from the input
    dedupe: str | None = None
    duplicates: int = 0  # exact repeats left out (dedupe)
    conflicts: int = 0  # repeats of a prompt with another target, kept (dedupe)
    conflicts_listed: tuple[str, ...] = ()
    #: input columns no record field is made from (their values are not in the output), sorted
    not_imported: tuple[str, ...] = ()
    #: the prompt format given (its name and hash), "" when none was (the default, plain)
    prompt_format: str = ""

    def describe(self, max_refusals: int = 20) -> str:
        keys = f"id field {self.id_field!r}" if self.id_field else "question hash"
        text = (
            f"{self.rows} rows from {self.input}: {self.labeled} labeled, {self.unlabeled} unlabeled"
            f" ({self.hidden_answers} with a hidden answer); question field {self.question_field!r},"
            f" answer field {self.answer_field!r}, keys from {keys}"
        )
        if self.choices:
            text += f"; multiple choice ({self.choices}), targets are option letters"
        if self.prompt_format:
            text += f"; prompts by format {self.prompt_format}"
        if self.not_imported:
            names = ", ".join(repr(c) for c in self.not_imported[:20])
            more = f" and {len(self.not_imported) - 20} more" if len(self.not_imported) > 20 else ""
            text += (f"\nnot imported: {len(self.not_imported)} input column(s) no record field is made from: "
                     f"{names}{more} (their values are not in the output)")
        if self.dedupe:
            text += (f"\ndedupe {self.dedupe}: {self.read} records read, {self.duplicates} exact repeats collapsed,"
                     f" {self.conflicts} repeated prompt(s) with another target kept as rows of their own")
            text += "".join(f"\n  - {c}" for c in self.conflicts_listed)
            if self.conflicts > len(self.conflicts_listed):
                text += f"\n  ... and {self.conflicts - len(self.conflicts_listed)} more"
        if self.refusals:
            text += f"\nrefused {len(self.refusals)} row(s) whose target no answer can match:"
            text += "".join(f"\n  - {r}" for r in self.refusals[:max_refusals])
            if len(self.refusals) > max_refusals:
                text += f"\n  ... and {len(self.refusals) - max_refusals} more (all listed in the manifest)"
        return text


class _Restart(Exception):
    """The whole input's field map differs from the one its first chunk gave: convert again with it."""

    def __init__(self, fields: FieldMap):
        super().__init__(fields)
        self.fields = fields


class _Pipeline:
    """Stages 2-4 over a source of chunks; yields row batches (row dicts, or a records table where
    :func:`fast_rows` built them) of at most ``batch_rows`` for stage 5."""

    def __init__(self, source: Any, opts: ImportOptions, batch_rows: int = BATCH_ROWS, progress=None,
                 fields: FieldMap | None = None):
        opts.check()
        self.opts = opts
        self.progress = progress
        self.batch_rows = batch_rows
        #: the input file's hash as its reader takes it (a file source)
        self.digest = FileDigest()
        if isinstance(source, (str, os.PathLike)):
            self.where = str(source)
            self.chunks = lambda: iter_chunks(source, batch_rows, digest=self.digest)
        else:
            self.where = "<rows>"
            self.chunks = lambda: _row_chunks(source)
        self.verl_plan = None
        #: the field map: given (a second pass, after the first found another), or detected as the
        #: input is read (see __iter__)
        self.fields = fields
        self.final = fields is not None
        if opts.from_verl:
            if isinstance(source, (str, os.PathLike)):
                self.verl_plan = VerlPlan.of(Path(source))
            self.fields = FieldMap("prompt", "reward_model.ground_truth", "extra_info.index", from_verl=True)
            self.final = True
        self.keys = KeyBuilder(opts.source, self.fields.id) if self.fields is not None else None
        self.dedupe = Deduper() if opts.dedupe == "exact" else None
        self.rows = self.labeled = self.hidden = self.seen = 0
        self.validate = True  # off when the version writer validates anyway
        self.as_rows = True  # False: a batch fast_rows built is yielded as its table
        self.refusals: list[Refusal] = []
        self.issues: list[Issue] = []
        #: every input column seen (an ordered set): the ones the field map does not read are named
        self.columns: dict[str, None] = {}

    def _repeat(self, rec: Raw) -> bool:
        """``dedupe``: whether ``rec`` repeats an earlier record's prompt and target exactly."""
        d, fm = rec.data, self.fields
        if fm.from_verl:
            prompt = d.get("prompt")
            rm = d.get("reward_model") if isinstance(d.get("reward_model"), Mapping) else {}
            ident = json.dumps(to_python(prompt), sort_keys=True, default=str, ensure_ascii=False)
            gt = rm.get("ground_truth")
            return self.dedupe.repeat(ident, None if gt is None else str(gt), rec.where)
        q = d.get(fm.question)
        if not isinstance(q, str) or not q.strip():
            return False  # (build_record reports it)
        if fm.choices:  # the options are part of the prompt; the answer as given
            opts = [d.get(c) for c in ((GPQA_CORRECT, *GPQA_INCORRECT) if fm.choices == "gpqa" else (fm.options,))]
            prompt = json.dumps([q.strip(), opts], sort_keys=True, default=str, ensure_ascii=False)
            raw = d.get(fm.answer) if fm.answer else None
            return self.dedupe.repeat(prompt, None if _missing(raw) else repr(raw), rec.where)
        target = normalise_target(d.get(fm.answer), fm.answer)[0] if fm.answer else None
        return self.dedupe.repeat(q.strip(), target, rec.where)

    def _convert(self, chunk: Chunk) -> tuple[Any, list[int]]:
        """One chunk's rows (a records table where :func:`fast_rows` made them) and each one's record number."""
        fast = fast_rows(chunk, self.fields, self.opts, self.keys, self.dedupe)
        if fast is not None:
            table, hidden, pos = fast
            if not self.issues:
                self.hidden += hidden
            return table, pos
        out, pos = [], []
        for rec in chunk.raw():
            if self.dedupe is not None and self._repeat(rec):
                continue
            o = (build_verl_record(rec, self.opts, self.keys, self.verl_plan) if self.fields.from_verl
                 else build_record(rec, self.fields, self.opts, self.keys))
            if o.issue is not None:
                self.issues.append(o.issue)
            elif o.refusal is not None:
                self.refusals.append(o.refusal)
            elif not self.issues:  # once the import has failed, only errors are still collected
                out.append(o.row)
                pos.append(rec.pos)
                self.hidden += o.hidden
        return out, pos

    def _batch(self, parts: list) -> Any:
        """One batch for stage 5 from the parts of consecutive chunks (rows or records tables)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if all(not isinstance(p, list) for p in parts) and not self.as_rows:
            out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
            labeled = pc.sum(pc.struct_field(out.column(EXTRA_INFO), "labeled")).as_py() or 0
            n = out.num_rows
        else:
            out = [r for p in parts for r in (p if isinstance(p, list) else p.to_pylist())]
            if self.validate:
                validate_rows(out)
            labeled, n = sum(1 for r in out if r[EXTRA_INFO]["labeled"]), len(out)
        self.rows += n
        self.labeled += labeled
        return out

    def _detect(self, stats: ColumnStats) -> FieldMap:
        o = self.opts
        return detect_fields(stats, where=self.where, labeled=o.labeled, question_field=o.question_field,
                             answer_field=o.answer_field, id_field=o.id_field)

    def __iter__(self) -> Iterator[Any]:
        """One pass: stage 2 decides the fields from the first chunk and stages 3-4 convert as the input
        is read, while the column statistics of the whole input are gathered; if the whole input
        gives another field map (a column with values only later, say), :class:`_Restart` says so and
        the caller runs a second pass with it. Without a first chunk's map, nothing is converted."""
        stats = None if self.final else ColumnStats()
        undecided = False
        self.seen = seen = 0
        parts: list = []  # the batch being gathered (rows, or records tables), of record group `current`
        current = -1
        for chunk in self.chunks():
            # (pyarrow's columns where it read the block, else the records' keys: Python reads them anyway)
            for c in (chunk.table.column_names if chunk.table is not None else (k for r in chunk.raw() for k in r.data)):
                self.columns.setdefault(str(c), None)
            if stats is not None:
                if chunk.table is None or not stats.add_table(chunk.table):
                    for r in chunk.raw():
                        stats.add(r.data)
                if self.fields is None and not undecided:
                    try:
                        self.fields = self._detect(stats)
                        self.keys = KeyBuilder(self.opts.source, self.fields.id)
                    except RecordError:
                        undecided = True  # (the whole input decides, below)
            seen += chunk.rows
            self.seen = seen
            if self.progress is not None:
                self.progress.update(chunk.rows)
            if self.fields is None or undecided:
                continue
            out, pos = self._convert(chunk)
            if self.issues or not pos:
                continue
            # batches of the records numbered [k * batch_rows, (k + 1) * batch_rows), whatever the
            # chunks: the Parquet's row groups are the same however the input was read
            start = 0
            while start < len(pos):
                group = pos[start] // self.batch_rows
                end = bisect.bisect_left(pos, (group + 1) * self.batch_rows, start)
                if parts and group != current:
                    yield self._batch(parts)
                    parts = []
                current = group
                parts.append(out[start:end] if end - start < len(pos) else out)
                start = end
        if parts and not self.issues:
            yield self._batch(parts)
        if stats is not None:
            if stats.rows == 0:
                raise RecordError(f"no records in {self.where}")
            fields = self._detect(stats)  # (raises what the whole input lacks)
            if fields != self.fields or undecided:
                raise _Restart(fields)
        if self.issues:
            raise RecordError(self.issues, header=f"cannot import {self.where}")
        if seen == 0:
            raise RecordError(f"no records in {self.where}")
        if self.rows == 0:
            raise RecordError(f"no row of {self.where} could be imported: all {len(self.refusals)} were refused"
                              + "".join(f"\n  - {r}" for r in self.refusals[:20]))

    def summary(self) -> ImportSummary:
        d = self.dedupe
        return ImportSummary(
            input=self.where, rows=self.rows, labeled=self.labeled, unlabeled=self.rows - self.labeled,
            hidden_answers=self.hidden, question_field=self.fields.question, answer_field=self.fields.answer,
            id_field=self.fields.id, refusals=tuple(self.refusals), choices=self.fields.choices,
            from_verl=self.fields.from_verl, read=self.seen, dedupe=self.opts.dedupe,
            duplicates=d.duplicates if d else 0, conflicts=d.conflicts if d else 0,
            conflicts_listed=tuple(d.listed) if d else (),
            not_imported=tuple(sorted(set(self.columns) - self.fields.reads())),
            prompt_format=self._format_said(),
        )

    def _format_said(self) -> str:
        if self.opts.prompt_format is None:
            return ""
        name, fmt = self.opts.format
        return f"{name!r} (sha256 {fmt.sha256()[:12]})"


def import_raw_with_summary(path_or_rows: Any, **options: Any) -> tuple[list[dict[str, Any]], ImportSummary]:
    """:func:`import_raw`, also returning an :class:`ImportSummary` (with the refused rows)."""
    opts, fields = ImportOptions(**options), None
    while True:
        pipe = _Pipeline(path_or_rows, opts, fields=fields)
        try:
            rows = [r for batch in pipe for r in batch]
        except _Restart as again:
            fields = again.fields
            continue
        return rows, pipe.summary()


def import_raw(path_or_rows: Any, **options: Any) -> list[dict[str, Any]]:
    """Convert raw question/answer data into validated records, in memory (see the module docstring).

    ``path_or_rows``: a ``.jsonl``/``.ndjson``, ``.json``, ``.csv``/``.tsv`` or ``.parquet`` path, a
    list of dicts or a DataFrame. Options (:class:`ImportOptions`): ``source`` (required; prefixes
    every key), ``data_source`` (default ``source``), ``split``, ``labeled`` (True/"auto"/False),
    ``question_field`` / ``answer_field`` / ``id_field`` (``""`` forces question-hash keys),
    ``ability``, ``system_prompt``, ``prompt_template`` (with ``{question}``; default
    :data:`DEFAULT_PROMPT_TEMPLATE`, or :data:`DEFAULT_CHOICE_TEMPLATE` for multiple choice),
    ``hidden_answers``, ``from_verl``. Raises :class:`RecordError` listing every bad row; rows whose
    target can never be matched are left out and listed in the summary
    (:func:`import_raw_with_summary`).
    """
    return import_raw_with_summary(path_or_rows, **options)[0]


def import_file(path: str | os.PathLike[str], out: str | os.PathLike[str], *, force: bool = False,
                batch_rows: int = BATCH_ROWS, progress: bool | None = None, **options: Any):
    """Import the raw file ``path`` as the dataset version ``out`` (Parquet + manifest), streaming.

    Memory is bounded by a batch (plus one small entry per row for keys); the manifest's parent is
    the raw file's hash, its rule ``import``, its config the options, its refusals the rows left out.
    Returns ``(ImportSummary, Manifest)``.
    """
    from .versions import Parent, VersionWriter, check_output, sha256_file

    path = Path(path)
    check_output(out, [path], force=force)
    opts = ImportOptions(**options)
    bar = _progress(path, progress)
    fields = None
    try:
        while True:
            pipe = _Pipeline(path, opts, batch_rows, progress=bar, fields=fields)
            pipe.validate = False
            pipe.as_rows = False  # the writer checks a table column-wise, with the same result as its rows
            try:
                with VersionWriter(out, rule="import", config=opts.config(), force=force,
                                   parents=[Parent(path.name, "", None, check_input(path))],  # (hashed below)
                                   schema=pipe.verl_plan.schema if pipe.verl_plan is not None else None) as w:
                    for batch in pipe:
                        w.write(batch)
                    for r in pipe.refusals:
                        w.refuse(r)
                    summary = pipe.summary()
                    # the bytes the reader read, hashed as it read them (else read again for the hash)
                    sha = pipe.digest.sha.hexdigest() if pipe.digest.whole else sha256_file(path)
                    w.parents[0] = Parent(path.name, sha, pipe.seen)  # (rows: the raw records read)
            except _Restart as again:  # (the writer discarded its temporary files)
                fields = again.fields
                if bar is not None:
                    bar.reset()
                continue
            break
    finally:
        if bar is not None:
            bar.close()
    return summary, w.manifest


def _progress(path: Path, enabled: bool | None):
    """A tqdm bar over records for ``path`` (total known for Parquet); None when disabled."""
    if enabled is False:
        return None
    from tqdm import tqdm

    total = None
    if path.suffix.lower() in (".parquet", ".pq"):
        from .versions import parquet_rows

        total = parquet_rows(path)
    return tqdm(total=total, desc=f"import {path.name}", unit=" rows", disable=None if enabled is None else not enabled,
                mininterval=0.5, leave=False)
