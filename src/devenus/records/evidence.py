"""The evidence table: what online steps and probe passes observed per sample, for offline tools.

One row per (sample key, round, step, kind, method) observation, keyed by ``extra_info.index``
(never verl's ``uid``). Online methods append every step through :class:`EvidenceWriter` (buffered in
memory, flushed as atomic Parquet part files); offline tools (transitions, selection, reports) read
every part with :func:`read_evidence`, filtered by kind / round / method / keys. Method state that a
later round needs (e.g. a pass-rate trajectory) belongs here, so that it can be read without
unpickling verl's checkpoint.

Layout: a directory of ``part-<seq>-r<round>-s<first step>-<last step>.parquet`` files, ``seq``
increasing across writers (a writer starts after the highest part already there). When a resumed run
records an observation again, the reader keeps the one from the later part.

Columns (:func:`evidence_schema`):

=====================  ==========  =================================================================
``key``                string      the sample key (``extra_info.index``)
``round``              int64       dataset round k of D(k)
``step``               int64       trainer step (probe passes: the step they ran after)
``kind``               string      what was observed, e.g. ``vote``, ``probe``, ``trajectory``
``method``             string      the method (or tool) that recorded it
``majority_answer``    string      the group's majority answer, null if none
``majority_pass_rate`` double      share of the group agreeing with it, null if unknown
``target_pass_rate``   double      share of the group matching the current target, null if none
``values``             string      method-specific values: a JSON object, keys sorted (any JSON
                                   values; decoded to a dict by the reader)
=====================  ==========  =================================================================

Which dataset an evidence table was collected on: ``dataset-r<round>.json`` beside its part files
(:func:`record_dataset`, :func:`read_provenance`). The trainer records it when it writes a round's first
evidence (name, sha256 and rows of each training file, :func:`devenus.records.versions.parent_of`); the
transition builder refuses evidence whose recorded parent hash is not D(k)'s. Written atomically; a
second run on the same round and the same data finds the same content, on other data it is refused (one
evidence directory per dataset round).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from devenus.atomic import atomic_write, write_text_atomic

from .versions import parent_of

EVIDENCE_COLUMNS: tuple[str, ...] = (
    "key", "round", "step", "kind", "method", "majority_answer", "majority_pass_rate",
    "target_pass_rate", "values",
)
#: the columns that identify one observation (a later part's row with the same identity wins)
IDENTITY: tuple[str, ...] = ("key", "round", "step", "kind", "method")
_PART = re.compile(r"^part-(\d{6,})-r(-?\d+)-s(-?\d+)-(-?\d+)\.parquet$")
SCHEMA_METADATA = {b"devenus.evidence": b"1"}


class EvidenceError(ValueError):
    """An evidence row is malformed, or an evidence directory cannot be read."""


def evidence_schema():
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("key", pa.string(), nullable=False),
            pa.field("round", pa.int64(), nullable=False),
            pa.field("step", pa.int64(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("method", pa.string(), nullable=False),
            pa.field("majority_answer", pa.string()),
            pa.field("majority_pass_rate", pa.float64()),
            pa.field("target_pass_rate", pa.float64()),
            pa.field("values", pa.string()),
        ],
        metadata=SCHEMA_METADATA,
    )


def _rate(v: Any) -> tuple[float | None, str | None]:
    """(the rate, None) or (None, why it is not one): a number in [0, 1], None or NaN (unknown: None)."""
    if v is None:
        return None, None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None, f"expected a number in [0, 1] or None, found {type(v).__name__} {v!r:.40}"
    v = float(v)
    if math.isnan(v):
        return None, None
    if not 0.0 <= v <= 1.0:
        return None, f"expected a number in [0, 1] or None, found {v!r}"
    return v, None


def _columns_problem(r: Mapping[str, Any]) -> tuple[str, str] | None:
    """(column, why) for the first column of the row ``r`` outside what the writer writes (values aside);
    the one definition :meth:`EvidenceWriter.append` and :func:`read_evidence` check against."""
    key = r["key"]
    if not isinstance(key, str) or not key:
        return "key", f"expected a non-empty str (extra_info.index), found {key!r:.60}"
    for name in ("round", "step"):
        if isinstance(r[name], bool) or not isinstance(r[name], int):
            return name, f"expected an int, found {type(r[name]).__name__} {r[name]!r:.40}"
    for name in ("kind", "method"):
        if not isinstance(r[name], str) or not r[name]:
            return name, f"expected a non-empty str, found {r[name]!r:.40}"
    if r["majority_answer"] is not None and not isinstance(r["majority_answer"], str):
        return "majority_answer", f"expected a str or None, found {type(r['majority_answer']).__name__}"
    for name in ("majority_pass_rate", "target_pass_rate"):
        why = _rate(r[name])[1]
        if why:
            return name, why
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def decode_values(text: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(the ``values`` column decoded, None) or (None, why it is not what the writer writes: null or the JSON
    text of an object, finite numbers only)."""
    if text is None:
        return {}, None
    try:
        v = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # (JSONDecodeError is a ValueError)
        return None, f"expected the JSON text of an object, found {text!r:.60} (not JSON: {exc})"
    if not isinstance(v, dict):
        return None, f"expected the JSON text of an object, found a {type(v).__name__}: {text!r:.60}"
    return v, None


def _row(key: Any, round: Any, step: Any, kind: Any, method: Any, majority_answer: Any,
         majority_pass_rate: Any, target_pass_rate: Any, values: Any) -> dict[str, Any]:
    row = {"key": key, "round": round, "step": step, "kind": kind, "method": method,
           "majority_answer": majority_answer, "majority_pass_rate": majority_pass_rate,
           "target_pass_rate": target_pass_rate}
    problem = _columns_problem(row)
    where = "evidence row" if problem and problem[0] == "key" else f"evidence for key {key!r}"
    if problem:
        raise EvidenceError(f"{where}: {problem[0]}: {problem[1]}")
    if values is not None and not isinstance(values, Mapping):
        raise EvidenceError(f"{where}: values: expected a dict or None, found {type(values).__name__}")
    try:
        text = None if values is None else json.dumps(dict(values), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EvidenceError(f"{where}: values: expected JSON values (finite numbers, str, lists, dicts): {exc}") from exc
    row.update(majority_pass_rate=_rate(majority_pass_rate)[0], target_pass_rate=_rate(target_pass_rate)[0],
               values=text)
    return row


def _parts(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := _PART.match(p.name)))


def evidence_parts(directory: str | os.PathLike[str], round: int | None = None) -> list[Path]:
    """The part files under ``directory`` (of one ``round``, or all), in part order: what an offline
    tool that reads the evidence passes to :func:`devenus.records.versions.write_version` as parents,
    so that the manifest pins them by hash and no output can overwrite them."""
    return [p for _, p in _parts(Path(directory))
            if round is None or int(_PART.match(p.name).group(2)) == round]


class EvidenceWriter:
    """Buffered appender of evidence rows for one method and round.

    ``append`` checks a row and keeps it in memory (a dict; no IO); every ``flush_rows`` rows, on
    :meth:`flush` and on :meth:`close` the buffer becomes one Parquet part file, written atomically.
    Rows still buffered when the process dies are lost, so call :meth:`flush` where the run's state
    is saved (verl's checkpoint) to keep the evidence and the checkpoint in step.
    """

    def __init__(self, directory: str | os.PathLike[str], *, method: str, round: int = 0, flush_rows: int = 65536):
        if not isinstance(method, str) or not method:
            raise EvidenceError(f"method: expected a non-empty str, found {method!r}")
        if flush_rows < 1:
            raise ValueError(f"flush_rows must be >= 1, got {flush_rows}")
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise EvidenceError(f"evidence directory {self.directory} is a file")
        self.method = method
        self.round = round
        self.flush_rows = flush_rows
        self._buf: list[dict[str, Any]] = []
        parts = _parts(self.directory)
        self._seq = (parts[-1][0] + 1) if parts else 0
        self.written: list[Path] = []

    def append(self, key: str, step: int, kind: str, *, majority_answer: str | None = None,
               majority_pass_rate: float | None = None, target_pass_rate: float | None = None,
               values: Mapping[str, Any] | None = None) -> None:
        self._buf.append(_row(key, self.round, step, kind, self.method, majority_answer,
                              majority_pass_rate, target_pass_rate, values))
        if len(self._buf) >= self.flush_rows:
            self.flush()

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append dicts with the :meth:`append` arguments as keys (``key``, ``step``, ``kind``, ...)."""
        for r in rows:
            r = dict(r)
            try:
                key, step, kind = r.pop("key"), r.pop("step"), r.pop("kind")
            except KeyError as exc:
                raise EvidenceError(f"evidence row {r!r:.80}: missing {exc}") from None
            self.append(key, step, kind, **r)

    def flush(self) -> Path | None:
        """Write the buffered rows as one part file (atomic); returns it, or None if nothing was buffered."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._buf:
            return None
        steps = [r["step"] for r in self._buf]
        path = self.directory / f"part-{self._seq:06d}-r{self.round}-s{min(steps)}-{max(steps)}.parquet"
        table = pa.Table.from_pylist(self._buf, schema=evidence_schema())
        with atomic_write(path) as tmp:
            pq.write_table(table, str(tmp))
        self._buf = []
        self._seq += 1
        self.written.append(path)
        return path

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> "EvidenceWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()


def evidence_table(directory: str | os.PathLike[str], *, kind: str | Iterable[str] | None = None,
                   round: int | Iterable[int] | None = None, method: str | Iterable[str] | None = None,
                   keys: Iterable[str] | None = None):
    """Every evidence row under ``directory`` as a ``pyarrow.Table``, filtered; a later part's row
    replaces an earlier one with the same (key, round, step, kind, method). Rows keep part order.
    The rows are not checked: :func:`read_evidence` checks every row it returns."""
    return _located_table(directory, kind=kind, round=round, method=method, keys=keys)[0].drop_columns(
        ["_part", "_row"]).replace_schema_metadata(SCHEMA_METADATA)


def _located_table(directory, *, kind=None, round=None, method=None, keys=None):
    """(:func:`evidence_table` with each row's part number ``_part`` and row in that part ``_row``, the part
    files by number)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory = Path(directory)
    if not directory.is_dir():
        raise EvidenceError(f"evidence directory not found: {directory}")

    def as_set(v):
        if v is None:
            return None
        return {v} if isinstance(v, (str, int)) else set(v)

    rounds, kinds, methods = as_set(round), as_set(kind), as_set(method)
    key_set = None if keys is None else set(keys)
    tables, paths = [], {}
    for seq, p in _parts(directory):
        if rounds is not None and int(_PART.match(p.name).group(2)) not in rounds:
            continue
        try:
            t = pq.read_table(p, schema=evidence_schema())
        except (pa.ArrowException, OSError) as exc:
            raise EvidenceError(f"cannot read evidence part {p}: {exc}") from exc
        paths[seq] = p
        t = t.append_column("_part", pa.array([seq] * t.num_rows, pa.int64()))
        t = t.append_column("_row", pa.array(range(t.num_rows), pa.int64()))
        mask = None
        for col, allowed in (("kind", kinds), ("round", rounds), ("method", methods), ("key", key_set)):
            if allowed is not None:
                m = pc.fill_null(pc.is_in(t[col], value_set=pa.array(sorted(allowed), type=t.schema.field(col).type)), False)
                mask = m if mask is None else pc.and_(mask, m)
        if mask is not None:
            t = t.filter(mask)
        tables.append(t)
    if not tables:
        schema = evidence_schema().append(pa.field("_part", pa.int64())).append(pa.field("_row", pa.int64()))
        return schema.empty_table(), paths
    t = pa.concat_tables(tables)
    # each identity's last row: a later part's observation replaces an earlier one
    last = {ident: i for i, ident in enumerate(zip(*(t[c].to_pylist() for c in IDENTITY)))}
    if len(last) != t.num_rows:
        t = t.take(pa.array(sorted(last.values()), pa.int64()))
    return t, paths


def read_evidence(directory: str | os.PathLike[str], *, check=None, **filters: Any) -> list[dict[str, Any]]:
    """:func:`evidence_table` as a list of dicts, ``values`` decoded to a dict (``{}`` when null).

    Every row returned is checked against what :class:`EvidenceWriter` writes (the same checks) and, with
    ``check(row) -> (field, why) | None``, against its reader's own schema (a rule's proposal fields); the
    first row that fails is one :class:`EvidenceError` line naming the part file, the row in it and the field."""
    table, paths = _located_table(directory, **filters)
    rows = table.to_pylist()
    for r in rows:
        part, at = paths[r.pop("_part")], r.pop("_row")
        problem = _columns_problem(r)
        if problem is None:
            r["values"], why = decode_values(r["values"])
            problem = ("values", why) if why else None
        if problem is None and check is not None:
            problem = check(r)
        if problem is not None:
            raise EvidenceError(f"evidence part {part}: row {at} (key {r['key']!r:.60}): {problem[0]}: {problem[1]}; "
                                f"not what the trainer writes")
        r["majority_pass_rate"], r["target_pass_rate"] = _rate(r["majority_pass_rate"])[0], _rate(r["target_pass_rate"])[0]
    return rows


# ------------------------------------------------------------------------------ provenance
class EvidenceProvenanceError(ValueError):
    """Evidence that does not belong to the dataset it is used with."""


def provenance_path(folder: str | os.PathLike[str], round: int) -> Path:
    return Path(folder) / f"dataset-r{round}.json"


def record_dataset(folder: str | os.PathLike[str], train_files: list[str], round: int) -> Path:
    """Write (or check) the provenance of round ``round``'s evidence under ``folder``."""
    parents = [parent_of(f).to_json() for f in train_files]
    doc = {"round": round, "datasets": parents}
    path = provenance_path(folder, round)
    if path.exists():
        have = read_provenance(folder, round)
        if have != doc:
            raise EvidenceProvenanceError(
                f"{path} records round {round} on {[p['name'] for p in have['datasets']]} "
                f"(sha256 {[p['sha256'][:12] for p in have['datasets']]}), this run trains on "
                f"{[p['name'] for p in parents]} (sha256 {[p['sha256'][:12] for p in parents]}): use another "
                f"devenus.evidence_dir or devenus.round")
        return path
    return write_text_atomic(path, json.dumps(doc, sort_keys=True, indent=1) + "\n")


def read_provenance(folder: str | os.PathLike[str], round: int) -> dict[str, Any]:
    """The provenance of round ``round`` under ``folder``; missing or malformed is one
    :class:`EvidenceProvenanceError` line naming the file and what was expected."""
    path = provenance_path(folder, round)
    if not path.is_file():
        raise EvidenceProvenanceError(f"no {path.name} in {folder}: which dataset this evidence was collected on is "
                                      f"unknown (it is written by the trainer with the first evidence of a round)")
    want = ('expected {"round": <int>, "datasets": [{"name": <str>, "sha256": <64 hex>, "rows": <int|null>}, ...]}')
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise EvidenceProvenanceError(f"{path} is not a provenance file: not JSON ({exc}); {want}") from None
    problem = _provenance_problem(doc)
    if problem:
        raise EvidenceProvenanceError(f"{path} is not a provenance file: {problem}; {want}")
    return {"round": doc["round"], "datasets": [dict(p) for p in doc["datasets"]]}


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _provenance_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"a {type(doc).__name__}, not an object"
    if isinstance(doc.get("round"), bool) or not isinstance(doc.get("round"), int):
        return f"round: {doc.get('round')!r:.40}"
    ds = doc.get("datasets")
    if not isinstance(ds, list) or not ds:
        return f"datasets: {ds!r:.40}"
    for i, p in enumerate(ds):
        if not isinstance(p, dict):
            return f"datasets[{i}]: {p!r:.40}"
        rows = p.get("rows")
        if (not isinstance(p.get("name"), str) or not isinstance(p.get("sha256"), str)
                or not _SHA256.fullmatch(p["sha256"])
                or not (rows is None or (isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0))):
            return f"datasets[{i}]: {json.dumps(p)[:80]}"
    return None
