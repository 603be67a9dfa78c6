"""What the readers yield: records (:class:`Raw`) in runs (:class:`Chunk`), and the block reader they share."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..validate import Issue

#: records per batch when streaming a file
BATCH_ROWS = 4096
#: read errors collected before the import stops listing them
MAX_READ_ISSUES = 1000


@dataclass
class Raw:
    """One raw record and where it came from (``pos``: 0-based record number; ``line``: 1-based)."""

    pos: int
    data: dict[str, Any]
    line: int | None = None

    @property
    def where(self) -> str:
        return f"line {self.line}" if self.line is not None else f"row {self.pos}"


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


def _record_chunks(records: Iterator[Raw], batch_rows: int) -> Iterator[Chunk]:
    records = iter(records)
    while batch := list(itertools.islice(records, batch_rows)):
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


def _line_issue(line: int, message: str) -> Issue:
    return Issue(None, None, f"line {line}", message)


def _at(rec: Raw) -> str:
    return f" ({rec.where})" if rec.line is not None else ""
