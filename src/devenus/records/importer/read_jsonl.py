"""The JSONL reader: blocks of whole lines read by ``pyarrow.json``; a block pyarrow refuses (or may
read otherwise than Python) is read line by line by Python's ``json`` to name each bad line."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..validate import Issue
from . import chunks as _chunks
from .chunks import Chunk, FileDigest, Raw, _line_blocks, _line_issue
from .read_json import _deep_message, _json_value_error, _loads

def _jsonl_chunks(path: Path, issues: list[Issue], arrow: bool = True, digest: FileDigest | None = None) -> Iterator[Chunk]:
    chunk_bytes = _chunks.CHUNK_BYTES  # (read when called: a test sets it small)
    pos = line0 = 0
    with open(path, "rb") as f:
        for k, data in enumerate(_line_blocks(f, chunk_bytes, digest.sha.update if digest is not None else None)):
            if k == 0:
                data = data.removeprefix(codecs.BOM_UTF8)
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
            problem = None if isinstance(obj, dict) else f"expected a JSON object, found {type(obj).__name__}"
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON: {exc.msg} (column {exc.colno})"
        except ValueError as exc:
            problem = _json_value_error(exc)
        except RecursionError:
            problem = _deep_message(line)
        if problem is not None:
            issues.append(_line_issue(lineno, problem))
            continue
        yield Raw(pos, obj, lineno)
        pos += 1
