"""Dataset versions: every records file a command produces, written as Parquet plus a manifest.

One path for every version (``import``, ``data hide-labels``, ``data pair-views``, ``testbed noise``,
and the coming selection materializer and transition builder): :func:`write_version` for rows in
memory, :class:`VersionWriter` for a stream of row batches. Both write

- ``<out>``: the records Parquet (validated, explicit schema), and
- ``<out stem>.manifest.json`` beside it: the parents' and the output's content hashes (sha256 of
  the file bytes), the rule and its config, row counts, every changed or removed row (key, field,
  before, after, why) and every refused input row.

Deterministic: nothing in either file depends on the clock, the host or absolute paths (parents are
named by file name and hash), so the same inputs give byte-identical files. Crash-safe: both files
are first written completely to temporary files beside their targets (our naming, cleaned by the
next write if a kill left them), then renamed; a failure before the renames leaves the previous
version exactly as it was, and a kill between the two renames leaves a manifest whose output hash
does not match its Parquet, which :func:`verify_manifest` reports.

The output rule is the same for every command (:func:`check_output`): an existing output is refused
unless ``force``, and an output that is one of the inputs is always refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .columnar import _canonical, _dumps  # noqa: F401 - the manifest's JSON, shared with the columnar lines
from .io import check_input, commit_temp, discard_temp, normalize_rows, temp_path
from .schema import EXTRA_INFO, SIMULATION
from .validate import Issue, RecordError, as_rows, find_issues

MANIFEST_FORMAT = "devenus.version/1"
MANIFEST_SUFFIX = ".manifest.json"
#: ``Change.field`` of a row the version drops (``before="present"``, ``after="removed"``)
ROW_REMOVED = "<row>"
_HASH_CHUNK = 1 << 20


class VersionError(ValueError):
    """A dataset version cannot be written, or a manifest does not match its files."""


# ---------------------------------------------------------------------------------------------------
# the manifest's parts
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """One changed field of one row (``field`` is a dotted path such as ``reward_model.ground_truth``),
    or a removed row (``field == ROW_REMOVED``)."""

    key: str
    field: str
    before: Any
    after: Any
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "field": self.field, "before": self.before, "after": self.after, "why": self.why}


@dataclass(frozen=True)
class Refusal:
    """An input row the version did not take: where it was (``row 3`` / ``line 4``), its key if one
    was built, the field at fault and why."""

    where: str
    field: str
    why: str
    key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "key": self.key, "field": self.field, "why": self.why}

    def __str__(self) -> str:
        key = f" (key {self.key!r})" if self.key else ""
        return f"{self.where}{key}: {self.field}: {self.why}"


@dataclass(frozen=True)
class Parent:
    """An input of a version, named by file name (never an absolute path) and content hash."""

    name: str
    sha256: str
    rows: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "rows": self.rows}


@dataclass(frozen=True)
class Manifest:
    """What a manifest file holds (``path``: where it was read from or written to; not stored).

    ``changes`` and ``refusals`` are read from the file on first use: a version of a large file can
    list hundreds of thousands of changes, and most readers (the commands' summaries,
    :func:`verify_manifest`) need only the header.
    """

    rule: str
    config: dict[str, Any]
    parents: list[Parent]
    output: dict[str, Any]
    counts: dict[str, int]
    path: Path | None = None

    @property
    def output_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.output["name"])

    def _lists(self) -> tuple[list[Change], list[Refusal]]:
        cached = self.__dict__.get("_lists_cache")
        if cached is None:
            d = _load_json(self.path)
            try:
                cached = ([Change(**c) for c in d["changes"]], [Refusal(**r) for r in d["refusals"]])
            except (KeyError, TypeError) as exc:
                raise VersionError(f"manifest {self.path} has a malformed change or refusal: {exc}") from exc
            object.__setattr__(self, "_lists_cache", cached)
        return cached

    @property
    def changes(self) -> list[Change]:
        return self._lists()[0]

    @property
    def refusals(self) -> list[Refusal]:
        return self._lists()[1]


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def parquet_rows(path: str | os.PathLike[str]) -> int | None:
    """Row count from a Parquet footer (None if the file is not Parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError):
        return None


def parent_of(path: str | os.PathLike[str], rows: int | None = None) -> Parent:
    """A :class:`Parent` for the file ``path`` (hashed now; ``rows`` from the Parquet footer if not given)."""
    path = check_input(path)
    if rows is None and path.suffix.lower() in (".parquet", ".pq"):
        rows = parquet_rows(path)
    return Parent(name=path.name, sha256=sha256_file(path), rows=rows)


def manifest_path(out: str | os.PathLike[str]) -> Path:
    """``<dir>/<stem>.manifest.json`` for the version file ``out``."""
    out = Path(out)
    return out.with_name(out.stem + MANIFEST_SUFFIX)


# ---------------------------------------------------------------------------------------------------
# the one output rule
# ---------------------------------------------------------------------------------------------------
def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_output(out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (), *,
                 force: bool = False) -> Path:
    """The rule every writing command follows; returns ``out`` as a Path or raises :class:`VersionError`.

    An output that is (or resolves to) one of ``inputs`` is always refused, ``--force`` or not; an
    existing output is refused unless ``force``; an output that is a directory is refused.
    """
    out = Path(out)
    targets = (out, manifest_path(out))
    for inp in inputs:
        inp = Path(inp)
        for t in targets:
            if _same_file(t, inp):
                raise VersionError(f"output {t} is the input {inp}: write the new version to another file "
                                   "(an input is never overwritten, even with --force)")
    if out.is_dir():
        raise VersionError(f"output {out} is a directory (expected a .parquet file path)")
    if out.exists() and not force:
        raise VersionError(f"output {out} exists (use --force to replace it)")
    return out


# ---------------------------------------------------------------------------------------------------
# changes between two rows
# ---------------------------------------------------------------------------------------------------
def _leaves(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        path = f"{prefix}{k}"
        if k in (EXTRA_INFO, SIMULATION, "reward_model") and isinstance(v, dict):
            out.update(_leaves(v, path + "."))
        else:
            out[path] = v
    return out


def removal_lines(keys: Any, why: Any) -> Any:
    """``remove(key, why)`` for every key of a string array, as a table for
    :meth:`VersionWriter.add_change_lines` (``key``, ``field``, ``line``)."""
    import pyarrow as pa

    from .columnar import change_lines

    n = len(keys)
    field = pa.array([ROW_REMOVED] * n, pa.string()) if n else pa.array([], pa.string())
    return pa.table({"key": keys, "field": field,
                     "line": change_lines(keys, ROW_REMOVED, pa.array(["present"] * n, pa.string()),
                                          pa.array(["removed"] * n, pa.string()), why)})


def row_changes(before: Mapping[str, Any], after: Mapping[str, Any], why: str) -> list[Change]:
    """Every field that differs between two versions of one row, as :class:`Change` entries (dotted
    paths; a missing or null ``simulation`` compares as empty)."""
    a, b = _leaves(before), _leaves(after)
    key = (after.get(EXTRA_INFO) or {}).get("index") or (before.get(EXTRA_INFO) or {}).get("index")
    out = []
    for path in sorted(set(a) | set(b)):
        if path == SIMULATION and a.get(path) is None and b.get(path) is None:
            continue
        va, vb = a.get(path), b.get(path)
        if va != vb:
            out.append(Change(str(key), path, va, vb, why))
    return out


# ---------------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------------
class VersionWriter:
    """Write one dataset version from row batches; use as a context manager.

    ``with VersionWriter(out, parents=[...], rule=..., config=...) as w: w.write(batch); w.change(...)``
    commits on a clean exit (both files renamed into place; ``w.manifest`` holds the result) and
    discards everything on an exception. Memory: one batch at a time; changes and refusals are
    spooled to a temporary file, not kept.
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        rule: str,
        config: Mapping[str, Any] | None = None,
        parents: Sequence[Parent | str | os.PathLike[str]] = (),
        force: bool = False,
        schema: Any = None,
        inputs: Iterable[str | os.PathLike[str]] = (),
    ):
        if not isinstance(rule, str) or not rule:
            raise ValueError("a version needs a rule name")
        path_inputs = [p for p in parents if not isinstance(p, Parent)] + list(inputs)
        self.out = check_output(out, path_inputs, force=force)
        self.manifest_out = manifest_path(self.out)
        self.rule = rule
        self.config = _canonical(dict(config or {}))
        self.parents = [p if isinstance(p, Parent) else parent_of(p) for p in parents]
        self.schema = schema
        self.manifest: Manifest | None = None
        self._keys: set[str] = set()
        self._rows = 0
        self._labeled = 0
        self._changed_keys: set[str] = set()
        self._removed = 0
        self._n_changes = 0
        self._n_refusals = 0
        self._writer = None
        self._tmp = temp_path(self.out)
        self._changes_tmp = temp_path(self.manifest_out)
        self._changes_f = open(self._changes_tmp, "w", encoding="utf-8")
        self._refusals: list[str] = []  # refusals are few (one per bad input row) and printed anyway
        self._done = False

    # -- rows
    def write(self, rows: Any) -> None:
        """Validate a batch (positions continue across batches) and append it to the Parquet.

        ``rows``: row dicts, a DataFrame, or a pyarrow Table / RecordBatch. A table is checked column
        by column (:mod:`.columnar`) with the same result as its rows as dicts: the same errors, the
        same bytes written; a large table costs no Python step per row."""
        import pyarrow as pa

        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if isinstance(rows, pa.Table):
            self._write_table(rows)
            return
        rows = as_rows(rows)
        if not rows:
            return
        issues = [Issue(None if i.row is None else i.row + self._rows, i.key, i.field, i.message)
                  for i in find_issues(rows)]
        extras = [r.get(EXTRA_INFO) if isinstance(r, Mapping) else None for r in rows]
        keys = [e.get("index") if isinstance(e, Mapping) else None for e in extras]
        self._check_keys([k if isinstance(k, str) else None for k in keys], issues)  # only str keys count
        self._append_rows(rows)

    def _check_keys(self, keys: list[str | None], issues: list[Issue]) -> None:
        """Add the keys of a batch (str or None); a key an earlier batch had is a violation (unless its
        row has one already). Raises the batch's :class:`RecordError` if there is any violation."""
        if not self._keys.isdisjoint(keys):  # the loop only when there is a duplicate to name
            flagged = {i.row for i in issues}
            for j, key in enumerate(keys):
                if isinstance(key, str):
                    if key in self._keys and self._rows + j not in flagged:
                        issues.append(Issue(self._rows + j, key, f"{EXTRA_INFO}.index",
                                            "expected a unique key, found a duplicate of an earlier row"))
                    self._keys.add(key)
        else:
            new = set(keys)
            new.discard(None)
            self._keys |= new
        if issues:
            raise RecordError(issues, header=f"the rows for {self.out} break the contract")

    def _append_rows(self, rows: list[dict[str, Any]]) -> None:
        """Write validated row dicts (the schema of the first batch holds for the rest)."""
        import pyarrow as pa

        norm, schema = normalize_rows(rows)
        if self.schema is None:
            self.schema = schema
        elif not schema.equals(self.schema, check_metadata=False):
            norm = self._conform(norm, schema)
        try:
            table = pa.Table.from_pylist(norm, schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise RecordError(f"cannot write rows {self._rows}..{self._rows + len(rows) - 1} to {self.out}: {exc}") from exc
        self._append_table(table, sum(1 for r in rows if (r.get(EXTRA_INFO) or {}).get("labeled") is True))

    def _append_table(self, table: Any, labeled: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            if self._writer is None:
                self._writer = pq.ParquetWriter(str(self._tmp), self.schema)
            self._writer.write_table(table)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise RecordError(f"cannot write rows {self._rows}..{self._rows + table.num_rows - 1} to {self.out}: {exc}") from exc
        self._rows += table.num_rows
        self._labeled += labeled

    def _write_table(self, table: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        from .columnar import conform, covered, find_table_issues, table_schema

        if table.num_rows == 0:
            return
        if not covered(table.schema):
            # a layout the column checks do not cover (a missing column, an unexpected type): the row path
            self.write(table.to_pylist())
            return
        issues = [Issue(None if i.row is None else i.row + self._rows, i.key, i.field, i.message)
                  for i in find_table_issues(table)]
        extra = table.column(EXTRA_INFO)
        self._check_keys(pc.struct_field(extra, "index").to_pylist(), issues)
        schema = table_schema(table)
        if self.schema is not None and not schema.equals(self.schema, check_metadata=False):
            self._append_rows(table.to_pylist())  # a batch unlike the first: fill it exactly as rows are filled
            return
        try:
            typed = conform(table, schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            typed = None  # a value the re-typing refuses (an overflow): the row path names it
        if typed is None:
            self._append_rows(table.to_pylist())
            return
        if self.schema is None:
            self.schema = schema
        labeled = pc.sum(pc.fill_null(pc.struct_field(extra, "labeled"), False)).as_py() or 0
        self._append_table(typed.combine_chunks(), int(labeled))

    def _conform(self, norm: list[dict[str, Any]], schema: Any) -> list[dict[str, Any]]:
        """Rows of a later batch filled to the schema of the first one; a field it lacks is an error."""
        for name in (EXTRA_INFO, SIMULATION):
            have = {f.name for f in self.schema.field(name).type}
            extra = [f.name for f in schema.field(name).type if f.name not in have]
            if extra:
                raise RecordError(f"rows from {self._rows} on carry {name}.{extra[0]}, which earlier rows of {self.out} lack")
        extra_cols = [n for n in schema.names if n not in self.schema.names]
        if extra_cols:
            raise RecordError(f"rows from {self._rows} on carry column {extra_cols[0]!r}, which earlier rows of {self.out} lack")
        keys = {name: [f.name for f in self.schema.field(name).type] for name in (EXTRA_INFO, SIMULATION)}
        out = []
        for r in norm:
            n = {}
            for name in self.schema.names:
                v = r.get(name)
                if name in keys and isinstance(v, Mapping):
                    v = {k: v.get(k) for k in keys[name]}
                n[name] = v
            out.append(n)
        return out

    # -- what changed
    def change(self, key: str, field: str, before: Any, after: Any, why: str) -> None:
        self.add_changes([Change(key, field, before, after, why)])

    def add_change_lines(self, table: Any) -> None:
        """Change entries built column-wise (:func:`.columnar.table_changes`, :func:`removal_lines`): a
        table with ``key``, ``field`` and ``line`` (the JSON line), written in its order."""
        import pyarrow.compute as pc

        n = table.num_rows
        if not n:
            return
        self._changes_f.write("\n".join(table.column("line").to_pylist()) + "\n")
        self._n_changes += n
        removed = pc.equal(table.column("field"), ROW_REMOVED)
        self._removed += pc.sum(removed).as_py() or 0
        self._changed_keys.update(pc.filter(table.column("key"), pc.invert(removed)).to_pylist())

    def add_changes(self, changes: Iterable[Change]) -> None:
        for c in changes:
            self._changes_f.write(_dumps(c.to_json()) + "\n")
            self._n_changes += 1
            if c.field == ROW_REMOVED:
                self._removed += 1
            else:
                self._changed_keys.add(c.key)

    def remove(self, key: str, why: str) -> None:
        """Record that the input row ``key`` is not in this version."""
        self.change(key, ROW_REMOVED, "present", "removed", why)

    def refuse(self, refusal: Refusal) -> None:
        self._refusals.append(_dumps(refusal.to_json()))
        self._n_refusals += 1

    # -- commit / abort
    def commit(self) -> Manifest:
        if self._done:
            raise RuntimeError("version already committed or aborted")
        try:
            return self._commit()
        except BaseException:
            self.abort()
            raise

    def _commit(self) -> Manifest:
        if self._rows == 0:
            raise VersionError(f"no rows to write to {self.out}")
        self._writer.close()
        self._writer = None
        self._changes_f.close()
        output = {"name": self.out.name, "sha256": sha256_file(self._tmp), "rows": self._rows,
                  "labeled": self._labeled}
        counts = {
            "rows_in": sum(p.rows or 0 for p in self.parents),
            "rows_out": self._rows,
            "changed_rows": len(self._changed_keys),
            "removed_rows": self._removed,
            "changes": self._n_changes,
            "refused": self._n_refusals,
        }
        header = {"format": MANIFEST_FORMAT, "rule": self.rule, "config": self.config,
                  "parents": [p.to_json() for p in self.parents], "output": output, "counts": counts}
        text = json.dumps(header, sort_keys=True, ensure_ascii=False, indent=1, allow_nan=False)
        man_tmp = temp_path(self.manifest_out)
        backup = None
        try:
            with open(man_tmp, "w", encoding="utf-8") as f, open(self._changes_tmp, encoding="utf-8") as ch:
                f.write(text[: text.rindex("}")].rstrip() + ",\n")
                f.write(' "refusals": [' + ",".join("\n  " + r for r in self._refusals)
                        + ("\n ]" if self._refusals else "]") + ",\n")
                f.write(' "changes": [')
                # the spool holds one JSON line per change (JSON escapes every newline inside one), so
                # the list is the spool with each newline turned into a separator: copied in blocks
                pending = None
                while block := ch.read(1 << 22):
                    f.write(pending if pending is not None else "\n  ")
                    pending = block.replace("\n", ",\n  ")
                if pending is None:
                    f.write("]\n}\n")
                else:
                    f.write(pending[: -len(",\n  ")] + "\n ]\n}\n")
            backup = self._link_backup()
            # The Parquet goes first. An exception after its rename puts the old one back (from the
            # hard-linked backup); a kill there leaves a manifest whose output hash does not match,
            # which verify_manifest reports. Never a manifest for a version that is not there.
            commit_temp(self._tmp, self.out, sync_dir=False)
            try:
                commit_temp(man_tmp, self.manifest_out)
            except BaseException:
                if backup is not None:
                    os.replace(backup, self.out)
                    backup = None
                raise
        finally:
            discard_temp(man_tmp)
            discard_temp(backup)
        discard_temp(self._changes_tmp)
        self._done = True
        self.manifest = read_manifest(self.manifest_out)
        return self.manifest

    def _link_backup(self) -> Path | None:
        """A hard link to the current output (no copy), to restore it if the manifest cannot follow."""
        if not self.out.exists():
            return None
        backup = temp_path(self.out)
        os.unlink(backup)
        try:
            os.link(self.out, backup)
        except OSError:
            return None  # a file system without hard links: a failure there is still detected
        return backup

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the temp file is discarded anyway
                pass
            self._writer = None
        if not self._changes_f.closed:
            self._changes_f.close()
        discard_temp(self._tmp)
        discard_temp(self._changes_tmp)
        self._done = True

    def __enter__(self) -> "VersionWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def write_version(
    rows: Any,
    out: str | os.PathLike[str],
    *,
    rule: str,
    config: Mapping[str, Any] | None = None,
    parent: Parent | str | os.PathLike[str] | Sequence[Parent | str | os.PathLike[str]] | None = None,
    changes: Iterable[Change] = (),
    refusals: Iterable[Refusal] = (),
    force: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Manifest:
    """Write ``rows`` (list of dicts, DataFrame, or an iterable of such batches) as the version ``out``.

    ``parent``: the input file(s) (paths are hashed; or :class:`Parent`), ``rule``: the name of what
    made it, ``config``: its settings (JSON values), ``changes``: every changed or removed row,
    ``refusals``: input rows not taken. Returns the :class:`Manifest`; see the module docstring for
    the guarantees.
    """
    if parent is None:
        parents: list[Any] = []
    elif isinstance(parent, (str, os.PathLike, Parent)):
        parents = [parent]
    else:
        parents = list(parent)
    with VersionWriter(out, rule=rule, config=config, parents=parents, force=force, inputs=inputs) as w:
        if isinstance(rows, (list, tuple)) or hasattr(rows, "to_dict"):
            w.write(rows)
        else:
            for batch in rows:
                w.write(batch)
        w.add_changes(changes)
        for r in refusals:
            w.refuse(r)
    assert w.manifest is not None
    return w.manifest


# ---------------------------------------------------------------------------------------------------
# reading and checking
# ---------------------------------------------------------------------------------------------------
def _manifest_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path if path.name.endswith(MANIFEST_SUFFIX) else manifest_path(path)


def _load_json(mpath: Path | None) -> dict[str, Any]:
    if mpath is None or not mpath.is_file():
        raise VersionError(f"no manifest {mpath}")
    try:
        with open(mpath, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise VersionError(f"manifest {mpath} is not valid JSON: {exc}") from exc


_LISTS_START = ' "refusals": ['


def _load_header(mpath: Path) -> dict[str, Any]:
    """The manifest without its change and refusal lists, read without loading them (they come
    after the header, one entry per line, in the files this module writes); other layouts are
    loaded whole."""
    lines = []
    try:
        with open(mpath, encoding="utf-8") as f:
            for line in f:
                if line.startswith(_LISTS_START):
                    return json.loads("".join(lines).rstrip().rstrip(",") + "\n}")
                lines.append(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        pass
    return _load_json(mpath)


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The manifest of a version (``path``: the manifest or its Parquet file)."""
    mpath = _manifest_file(path)
    if not mpath.is_file():
        raise VersionError(f"no manifest {mpath}" + (f" for {path}" if Path(path) != mpath else ""))
    d = _load_header(mpath)
    if not isinstance(d, dict) or d.get("format") != MANIFEST_FORMAT:
        raise VersionError(f"{mpath} is not a {MANIFEST_FORMAT} manifest")
    try:
        return Manifest(
            rule=d["rule"],
            config=d["config"],
            parents=[Parent(**p) for p in d["parents"]],
            output=d["output"],
            counts=d["counts"],
            path=mpath,
        )
    except (KeyError, TypeError) as exc:
        raise VersionError(f"manifest {mpath} lacks a field or has an unknown one: {exc}") from exc


def verify_manifest(path: str | os.PathLike[str],
                    parents: Iterable[str | os.PathLike[str]] = ()) -> Manifest:
    """Read a manifest and check that its Parquet (and the given parent files) match its hashes.

    Raises :class:`VersionError` naming the file whose hash differs: a version cut short between its
    two renames, or a file changed after it was written.
    """
    m = read_manifest(path)
    out = m.output_path
    assert out is not None
    if not out.is_file():
        raise VersionError(f"manifest {m.path} names {out.name}, which is missing")
    got = sha256_file(out)
    if got != m.output["sha256"]:
        raise VersionError(f"{out} does not match its manifest {m.path.name} (sha256 {got[:12]}... != "
                           f"{m.output['sha256'][:12]}...): the version is incomplete or was changed after writing")
    known = {p.name: p for p in m.parents}
    for p in parents:
        p = Path(p)
        want = known.get(p.name)
        if want is None:
            raise VersionError(f"{p.name} is not a parent of {out.name} (parents: {sorted(known)})")
        got = sha256_file(p)
        if got != want.sha256:
            raise VersionError(f"parent {p} does not match the hash in {m.path.name} ({got[:12]}... != {want.sha256[:12]}...)")
    return m
