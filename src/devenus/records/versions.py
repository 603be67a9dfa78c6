"""Dataset versions: every records file a command produces, written as Parquet plus a manifest.

One path for every version (``import``, ``data hide-labels``, ``data pair-views``, ``testbed noise``,
the selection materializer, the transition builder, the lifecycle): :class:`VersionWriter` for a
stream of batches, :func:`write_version` for rows in memory (a VersionWriter with one batch). A batch
(row dicts, a DataFrame, an Arrow table) becomes an Arrow table, is validated once, column-wise
(:func:`.validate.find_table_issues`), and is appended. Three files:

- ``<out>``: the records Parquet (validated, explicit schema);
- ``<out stem>.changes.jsonl`` (only when something changed): every changed or removed row (key,
  field, before, after, why), one JSON object a line, streamed while the rows are written;
- ``<out stem>.manifest.json``: one JSON document (``json.dump``), written last: the parents' and the
  output's content hashes (sha256 of the file bytes), the rule and its config, row counts, the
  change file's count and hash, every refused input row.

Every input a caller names (``parent=`` / ``inputs=``: D(k), each evidence part, the pool) is a parent
in the manifest, with its hash. Deterministic: nothing in any file depends on the clock, the host or
absolute paths (parents are named by file name and hash), so the same inputs give byte-identical
files. Crash-safe: all files are first written completely to temporary files beside their targets,
then renamed through :class:`devenus.atomic.AtomicFiles` (changes, Parquet, manifest last); an exception leaves
the previous version exactly as it was, and a kill between the renames leaves a manifest whose
hashes do not match, which :func:`verify_manifest` reports.

The output rule is the same for every command (:func:`check_output`), checked before anything is
written: an output file (the Parquet, its manifest, its change file) that is one of the inputs is
always refused; an existing manifest that belongs to another dataset (it names another output, or is
not a devenus manifest) is always refused; an existing version of this output is replaced only with
``force``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devenus.atomic import AtomicFiles

from .columnar import _canonical, _dumps
from .io import check_input
from .schema import EXTRA_INFO, SIMULATION
from .column_rules import covered
from .validate import Issue, RecordError, as_rows, find_table_issues, rows_table

MANIFEST_FORMAT = "devenus.version/2"
#: manifests of the first layout (changes and refusals inline) are still read
READ_FORMATS = ("devenus.version/1", MANIFEST_FORMAT)
MANIFEST_SUFFIX = ".manifest.json"
CHANGES_SUFFIX = ".changes.jsonl"
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
    """An input of a version, named by file name (never an absolute path) and content hash.

    ``path``: where it was read (not stored; the output rule checks every output against it)."""

    name: str
    sha256: str
    rows: int | None = None
    path: Path | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "rows": self.rows}


@dataclass(frozen=True)
class Manifest:
    """What a manifest file holds (``path``: where it was read from or written to; not stored).

    ``changes`` is read from the change file on each use (a version of a large file can list
    hundreds of thousands of changes, and most readers need only the header): iterate
    :meth:`iter_changes` to stream it."""

    rule: str
    config: dict[str, Any]
    parents: list[Parent]
    output: dict[str, Any]
    counts: dict[str, int]
    refusals: list[Refusal]
    #: ``{"sha256", "count"}`` of the change file ``<stem>.changes.jsonl``, None when nothing changed
    #: (or, in the first layout, when the list is inline)
    changes_file: dict[str, Any] | None = None
    path: Path | None = None
    format: str = MANIFEST_FORMAT

    @property
    def output_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.output["name"])

    @property
    def changes_path(self) -> Path | None:
        if self.path is None or self.changes_file is None:
            return None
        return self.path.with_name(self.path.name[: -len(MANIFEST_SUFFIX)] + CHANGES_SUFFIX)

    def iter_changes(self) -> Iterator[Change]:
        if self.format != MANIFEST_FORMAT:  # the first layout: the list is inside the manifest
            yield from (_change(c, self.path) for c in _load_json(self.path).get("changes", []))
            return
        cpath = self.changes_path
        if cpath is None:
            return
        if not cpath.is_file():
            raise VersionError(f"manifest {self.path} lists {self.changes_file['count']} changes in {cpath.name}, which is missing")
        with open(cpath, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    yield _change(json.loads(line), cpath)
                except json.JSONDecodeError as exc:
                    raise VersionError(f"{cpath} line {n}: not JSON: {exc}") from exc

    @property
    def changes(self) -> list[Change]:
        return list(self.iter_changes())


def _change(d: Any, where: Path | None) -> Change:
    try:
        return Change(**d)
    except TypeError as exc:
        raise VersionError(f"{where} has a malformed change {d!r}: {exc}") from exc


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
    return Parent(name=path.name, sha256=sha256_file(path), rows=rows, path=path)


def manifest_path(out: str | os.PathLike[str]) -> Path:
    """``<dir>/<stem>.manifest.json`` for the version file ``out``."""
    out = Path(out)
    return out.with_name(out.stem + MANIFEST_SUFFIX)


def changes_path(out: str | os.PathLike[str]) -> Path:
    """``<dir>/<stem>.changes.jsonl`` for the version file ``out``."""
    out = Path(out)
    return out.with_name(out.stem + CHANGES_SUFFIX)


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


def _paths(inputs: Iterable[Parent | str | os.PathLike[str]]) -> list[Path]:
    return [Path(p.path) if isinstance(p, Parent) else Path(p) for p in inputs
            if not isinstance(p, Parent) or p.path is not None]


def check_output(out: str | os.PathLike[str], inputs: Iterable[Parent | str | os.PathLike[str]] = (), *,
                 force: bool = False) -> Path:
    """The rule every writing command follows, before it writes anything; returns ``out`` as a Path or
    raises :class:`VersionError`.

    - an output file (the Parquet, its manifest, its change file) that is (or resolves to) one of
      ``inputs`` (paths or :class:`Parent`): always refused, ``force`` or not;
    - an existing manifest at the output's manifest path that is not a devenus manifest, or that
      names another output file (``x.parquet``'s manifest when writing ``x.pq``): always refused, it
      belongs to another dataset;
    - an output named like a manifest or change file (the input's own manifest): always refused;
    - an existing output: refused unless ``force`` (a version whose manifest no longer matches its
      Parquet, as a kill between the renames leaves it, is still this output's and may be replaced;
      the manifest and change file of this output whose Parquet is gone vouch for nothing and are
      replaced without ``force``);
    - an output that is a directory: refused.
    """
    out = Path(out)
    targets = (out, manifest_path(out), changes_path(out))
    for inp in _paths(inputs):
        for t in targets:
            if _same_file(t, inp):
                raise VersionError(f"output {t} is the input {inp}: write the new version to another file "
                                   "(an input is never overwritten, even with --force)")
    if out.is_dir():
        raise VersionError(f"output {out} is a directory (expected a .parquet file path)")
    if out.name.endswith((MANIFEST_SUFFIX, CHANGES_SUFFIX)):
        raise VersionError(f"output {out} is named as a version's manifest or change file, not as its Parquet: "
                           "choose a .parquet path")
    mpath = manifest_path(out)
    if mpath.exists():
        try:
            named = read_manifest(mpath).output.get("name")
        except VersionError as exc:
            raise VersionError(f"{mpath} exists and is not the manifest of a devenus version ({exc}): "
                               f"writing {out.name} would replace it, even with --force; choose another --out") from None
        if named != out.name:
            raise VersionError(f"{mpath} is the manifest of {named}, another dataset: writing {out.name} would "
                               "replace it, even with --force; choose another --out")
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
    return pa.table({"key": keys, "field": pa.array([ROW_REMOVED] * n, pa.string()),
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
def _as_parents(parents: Iterable[Parent | str | os.PathLike[str]]) -> list[Parent]:
    """Each input once (a path and a :class:`Parent` of the same file are one), in the order given."""
    out: list[Parent] = []
    for p in parents:
        p = p if isinstance(p, Parent) else parent_of(p)
        if any((p.path is not None and q.path is not None and _same_file(p.path, q.path))
               or (p.name, p.sha256) == (q.name, q.sha256) for q in out):
            continue
        out.append(p)
    return out


class VersionWriter:
    """Write one dataset version from batches; use as a context manager.

    ``with VersionWriter(out, parents=[...], rule=..., config=...) as w: w.write(batch); w.change(...)``
    commits on a clean exit (the files renamed into place; ``w.manifest`` holds the result) and
    discards everything on an exception. Memory: one batch at a time; changes are streamed to the
    change file's temporary file, not kept.

    ``parents`` and ``inputs`` (paths, or :class:`Parent` from :func:`parent_of`) are the same thing:
    every one is a parent in the manifest and is checked against the outputs (the two names are kept
    for the callers that pass a hashed Parent and its path)."""

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        rule: str,
        config: Mapping[str, Any] | None = None,
        parents: Sequence[Parent | str | os.PathLike[str]] = (),
        force: bool = False,
        schema: Any = None,
        inputs: Iterable[Parent | str | os.PathLike[str]] = (),
    ):
        if not isinstance(rule, str) or not rule:
            raise ValueError("a version needs a rule name")
        given = list(parents) + list(inputs)
        self.out = check_output(out, given, force=force)
        self.manifest_out = manifest_path(self.out)
        self.changes_out = changes_path(self.out)
        self.rule = rule
        self.config = _canonical(dict(config or {}))
        self.parents = _as_parents(given)
        self.schema = schema
        self.manifest: Manifest | None = None
        self._keys: set[str] = set()
        self._rows = 0
        self._labeled = 0
        self._changed_keys: set[str] = set()
        self._removed = 0
        self._n_changes = 0
        self._refusals: list[dict[str, Any]] = []  # few (one per bad input row) and printed anyway
        self._writer = None
        # the manifest last: it names the others' hashes, so a kill between renames is detectable
        self._files = AtomicFiles([self.changes_out, self.out, self.manifest_out])
        self._changes_tmp, self._tmp, self._manifest_tmp = self._files.temps
        self._changes_f = open(self._changes_tmp, "w", encoding="utf-8")
        self._done = False

    # -- rows
    def write(self, rows: Any) -> None:
        """Validate a batch (positions continue across batches) and append it to the Parquet.

        ``rows``: row dicts, a DataFrame, or a pyarrow Table / RecordBatch. Every batch becomes an
        Arrow table once (:meth:`_table`), checked (a table column by column by
        :func:`.validate.find_table_issues`, which names a bad row as the row checker does; rows by
        the row checker before they are converted), given the schema of the first batch, appended."""
        import pyarrow.compute as pc

        table, named = self._table(rows)
        if table is None or table.num_rows == 0:
            return
        table = table.combine_chunks()  # (once: the checks and the re-typing below then copy nothing)
        issues = [] if named else [Issue(None if i.row is None else i.row + self._rows, i.key, i.field, i.message)
                                   for i in find_table_issues(table)]
        self._check_keys(pc.struct_field(table.column(EXTRA_INFO), "index").to_pylist(), issues)
        labeled = pc.sum(pc.fill_null(pc.struct_field(table.column(EXTRA_INFO), "labeled"), False)).as_py() or 0
        self._append_table(self._fit(table), int(labeled))

    def _table(self, rows: Any) -> tuple[Any, bool]:
        """``(table, named)``: a batch as an Arrow table of a layout the column checks cover, and whether
        its rows were checked on the way. A table is as it is (checked column-wise by :meth:`write`);
        row dicts (or a table of another layout) become a table once and are checked as they do
        (:func:`.validate.rows_table`)."""
        import pyarrow as pa

        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if isinstance(rows, pa.Table):
            if covered(rows.schema):
                return rows, False
            rows = rows.to_pylist()
        rows = as_rows(rows)
        if not rows:
            return None, True
        table, issues = rows_table(rows)
        if issues:
            raise RecordError([Issue(None if i.row is None else i.row + self._rows, i.key, i.field, i.message)
                               for i in issues], header=f"the rows for {self.out} break the contract")
        return table, True

    def _fit(self, table: Any):
        """``table`` in the version's schema (set by the first batch, or given): a re-typing where
        that is all it takes, else rebuilt from its values; a field earlier batches lack is an error."""
        import pyarrow as pa

        from .columnar import conform, table_schema

        if self.schema is None:
            self.schema = table_schema(table)
        for name in (EXTRA_INFO, SIMULATION):
            have = {f.name for f in self.schema.field(name).type}
            t = table.schema.field(name).type if name in table.column_names else None
            extra = [f.name for f in t if f.name not in have] if t is not None and pa.types.is_struct(t) else []
            if extra:
                raise RecordError(f"rows from {self._rows} on carry {name}.{extra[0]}, which earlier rows of {self.out} lack")
        extra_cols = [n for n in table.column_names if n not in self.schema.names]
        if extra_cols:
            raise RecordError(f"rows from {self._rows} on carry column {extra_cols[0]!r}, which earlier rows of {self.out} lack")
        try:
            typed = conform(table, self.schema)
            if typed is None:  # more than a re-typing (an int column where the first batch had floats)
                typed = pa.Table.from_pylist(table.to_pylist(), schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise RecordError(f"cannot write rows {self._rows}..{self._rows + table.num_rows - 1} to {self.out}: {exc}") from exc
        return typed.combine_chunks()

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

    # -- what changed
    def change(self, key: str, field: str, before: Any, after: Any, why: str) -> None:
        self.add_changes([Change(key, field, before, after, why)])

    def add_change_lines(self, table: Any) -> None:
        """Change entries built column-wise (:func:`.labels` table edits, :func:`.columnar.table_changes`,
        :func:`removal_lines`): a table with ``key``, ``field`` and ``line`` (the JSON line), in its order."""
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
        self._refusals.append(_canonical(refusal.to_json()))

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
            "refused": len(self._refusals),
        }
        changes = None
        if self._n_changes:
            # named by the manifest's own name (<stem>.changes.jsonl), so that the text names no file
            # but the output: two versions of the same rows differ only there
            changes = {"sha256": sha256_file(self._changes_tmp), "count": self._n_changes}
        doc = {"format": MANIFEST_FORMAT, "rule": self.rule, "config": self.config,
               "parents": [p.to_json() for p in self.parents], "output": output, "counts": counts,
               "changes": changes, "refusals": self._refusals}
        text = json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=1, allow_nan=False) + "\n"
        with open(self._manifest_tmp, "w", encoding="utf-8") as f:
            f.write(text)
        if changes is None:
            # nothing changed: no change file, and an old one of this output goes with the old manifest
            self._files.targets.pop(0)
            os.unlink(self._files.temps.pop(0))
        self._files.commit()
        if changes is None and self.changes_out.exists():
            os.unlink(self.changes_out)
        self._done = True
        self.manifest = read_manifest(self.manifest_out)
        return self.manifest

    def abort(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):  # the temp file is discarded anyway
                self._writer.close()
            self._writer = None
        if not self._changes_f.closed:
            self._changes_f.close()
        if not self._files.done:
            self._files.discard()
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
    changes: Iterable[Change] | Any = (),
    refusals: Iterable[Refusal] = (),
    force: bool = False,
    inputs: Iterable[Parent | str | os.PathLike[str]] = (),
) -> Manifest:
    """Write ``rows`` (list of dicts, DataFrame, Arrow table, or an iterable of such batches) as the
    version ``out``: a :class:`VersionWriter` with these batches.

    ``parent`` / ``inputs``: every input file (paths are hashed; or :class:`Parent` from
    :func:`parent_of`): each is a parent in the manifest and is never overwritten; ``rule``: the name
    of what made it, ``config``: its settings (JSON values), ``changes``: every changed or removed
    row (or a table of change lines, as the :mod:`.labels` table edits give them), ``refusals``: input
    rows not taken. Returns the :class:`Manifest`; see the module docstring
    for the guarantees.
    """
    import pyarrow as pa

    if parent is None:
        parents: list[Any] = []
    elif isinstance(parent, (str, os.PathLike, Parent)):
        parents = [parent]
    else:
        parents = list(parent)
    with VersionWriter(out, rule=rule, config=config, parents=parents, force=force, inputs=inputs) as w:
        if isinstance(rows, (list, tuple, pa.Table, pa.RecordBatch)) or hasattr(rows, "to_dict"):
            w.write(rows)
        else:
            for batch in rows:
                w.write(batch)
        if isinstance(changes, pa.Table):
            w.add_change_lines(changes)
        else:
            w.add_changes(changes)
        for r in refusals:
            w.refuse(r)
    assert w.manifest is not None
    return w.manifest


# ---------------------------------------------------------------------------------------------------
# reading and checking
# ---------------------------------------------------------------------------------------------------
def _load_json(mpath: Path | None) -> dict[str, Any]:
    if mpath is None or not mpath.is_file():
        raise VersionError(f"no manifest {mpath}")
    try:
        with open(mpath, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise VersionError(f"manifest {mpath} is not valid JSON: {exc}") from exc


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The manifest of a version (``path``: the manifest or its Parquet file); either layout
    (:data:`READ_FORMATS`)."""
    mpath = Path(path) if Path(path).name.endswith(MANIFEST_SUFFIX) else manifest_path(path)
    if not mpath.is_file():
        raise VersionError(f"no manifest {mpath}" + (f" for {path}" if Path(path) != mpath else ""))
    d = _load_json(mpath)
    if not isinstance(d, dict) or d.get("format") not in READ_FORMATS:
        raise VersionError(f"{mpath} is not a devenus.version manifest (format {READ_FORMATS[-1]} or {READ_FORMATS[0]})")
    try:
        changes = d.get("changes") if d["format"] == MANIFEST_FORMAT else None
        if changes is not None and not (isinstance(changes, dict) and {"sha256", "count"} <= set(changes)):
            raise TypeError(f"changes must give the change file's sha256 and count, found {changes!r}")
        return Manifest(
            rule=d["rule"],
            config=d["config"],
            parents=[Parent(**p) for p in d["parents"]],
            output=d["output"],
            counts=d["counts"],
            refusals=[Refusal(**r) for r in d["refusals"]],
            changes_file=changes,
            path=mpath,
            format=d["format"],
        )
    except (KeyError, TypeError) as exc:
        raise VersionError(f"manifest {mpath} lacks a field or has an unknown one: {exc}") from exc


def verify_manifest(path: str | os.PathLike[str],
                    parents: Iterable[str | os.PathLike[str]] = ()) -> Manifest:
    """Read a manifest and check that its Parquet, its change file (and the given parent files) match
    its hashes.

    Raises :class:`VersionError` naming the file whose hash differs: a version cut short between its
    renames, or a file changed after it was written.
    """
    m = read_manifest(path)
    out = m.output_path
    assert out is not None
    if not out.is_file():
        raise VersionError(f"manifest {m.path} names {out.name}, which is missing")
    cpath = m.changes_path
    for f, want in [(out, m.output["sha256"])] + ([(cpath, m.changes_file["sha256"])] if cpath is not None else []):
        got = sha256_file(f) if f.is_file() else "missing"
        if got != want:
            raise VersionError(f"{f} does not match its manifest {m.path.name} (sha256 {got[:12]}... != "
                               f"{want[:12]}...): the version is incomplete or was changed after writing")
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
