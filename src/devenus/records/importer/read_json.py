"""The ``.json`` reader (one document, loaded whole) and Python's JSON reading that the JSONL reader
falls back to: every error named by its line (invalid JSON, a too-long integer, too deep a value)."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..validate import Issue, RecordError
from .chunks import Raw

_JSON_LIST_KEYS = ("data", "rows", "examples", "instances", "records", "items")


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
    data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
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
