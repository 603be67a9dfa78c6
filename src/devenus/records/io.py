"""Reading and writing record files (Parquet), atomically.

:func:`write_records` validates the rows, builds a table with the explicit schema
(:func:`~devenus.records.schema.records_schema`) and writes it to a temporary file in the target's
directory, fsyncs it and renames it over the target with :func:`os.replace`. A crash (or any
exception) before the rename leaves an existing file untouched and removes the temporary file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .schema import (
    EXTRA_INFO,
    EXTRA_INFO_STANDARD,
    METHOD_COLUMNS,
    SIMULATION,
    SIMULATION_FIELDS,
    records_schema,
)
from .validate import Issue, RecordError, _category, as_rows, to_python, validate_rows

_KNOWN_COLUMNS = set(METHOD_COLUMNS) | {SIMULATION}


def _infer_type(path: str, values: list[Any]):
    """pyarrow type of a free-form metadata field from its non-None values."""
    import pyarrow as pa

    cats = {_category(v) for v in values}
    if not cats:
        return pa.string()
    if cats == {"bool"}:
        return pa.bool_()
    if cats == {"int"}:
        return pa.int64()
    if cats <= {"int", "float"}:
        return pa.float64()
    if cats == {"str"}:
        return pa.string()
    try:
        return pa.array(values).type
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise RecordError([Issue(None, None, path, f"cannot store these values in one Parquet column: {exc}")]) from exc


def normalize_rows(rows: Any) -> tuple[list[dict[str, Any]], Any]:
    """Rows with every struct filled to one key set (missing keys -> None), and their schema.

    Standard ``extra_info`` keys are always present; extra metadata keys found in any row are added
    to every row; a non-null ``simulation`` gets every simulation key. Returns (rows, pyarrow schema).
    The input rows are not modified.
    """
    rows = [to_python(r) for r in as_rows(rows)]
    extra_vals: dict[str, list[Any]] = {}
    sim_vals: dict[str, list[Any]] = {}
    col_vals: dict[str, list[Any]] = {}
    for r in rows:
        for k, v in (r.get(EXTRA_INFO) or {}).items():
            if k not in EXTRA_INFO_STANDARD:
                extra_vals.setdefault(k, [])
                if v is not None:
                    extra_vals[k].append(v)
        sim = r.get(SIMULATION)
        if isinstance(sim, Mapping):
            for k, v in sim.items():
                if k not in SIMULATION_FIELDS:
                    sim_vals.setdefault(k, [])
                    if v is not None:
                        sim_vals[k].append(v)
        for k, v in r.items():
            if k not in _KNOWN_COLUMNS:
                col_vals.setdefault(k, [])
                if v is not None:
                    col_vals[k].append(v)

    schema = records_schema(
        {k: _infer_type(f"{EXTRA_INFO}.{k}", v) for k, v in extra_vals.items()},
        {k: _infer_type(f"{SIMULATION}.{k}", v) for k, v in sim_vals.items()},
        {k: _infer_type(k, v) for k, v in col_vals.items()},
    )
    extra_keys = [f.name for f in schema.field(EXTRA_INFO).type]
    sim_keys = [f.name for f in schema.field(SIMULATION).type]
    out = []
    for r in rows:
        n = {}
        for name in schema.names:
            v = r.get(name)
            if name == EXTRA_INFO and isinstance(v, Mapping):
                v = {k: v.get(k) for k in extra_keys}
            elif name == SIMULATION and isinstance(v, Mapping):
                v = {k: v.get(k) for k in sim_keys}
            n[name] = v
        out.append(n)
    return out, schema


def records_to_table(rows: Any, *, validate: bool = True):
    """A ``pyarrow.Table`` of ``rows`` (list of dicts or DataFrame) with the explicit records schema.

    With ``validate`` (default) the rows are checked first and a :class:`RecordError` is raised if
    they break the contract.
    """
    import pyarrow as pa

    rows = as_rows(rows)
    if validate:
        validate_rows(rows)
    norm, schema = normalize_rows(rows)
    try:
        return pa.Table.from_pylist(norm, schema=schema)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise RecordError(f"cannot build a records table: {exc}") from exc


def _write_parquet(table, fileobj) -> None:
    """Write ``table`` as Parquet to an open binary file (one seam, so tests can simulate a crash)."""
    import pyarrow.parquet as pq

    pq.write_table(table, fileobj)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Temporary files are named ``.<target name>.devenus-<pid>-<random><suffix>`` (``hidden=False``:
# without the leading dot) so that one killed by SIGKILL (which no ``finally`` survives) can be
# recognised as ours and removed by the next write to the same target: the pid says whether its
# writer is still alive.
_TMP_MARK = ".devenus-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but belongs to someone else: not ours to judge
    return True


def clean_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Remove temporary files (or folders) of our own naming for ``path`` whose writing process is gone.

    Returns the removed paths. Files of other processes still running (and of this one) are kept.
    """
    import shutil

    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    removed = []
    prefixes = (f".{path.name}{_TMP_MARK}", f"{path.name}{_TMP_MARK}")
    try:
        candidates = [(p, pre) for p in directory.iterdir() for pre in prefixes if p.name.startswith(pre)]
    except OSError:
        return removed
    for p, pre in candidates:
        try:
            pid = int(p.name[len(pre):].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid() or _pid_alive(pid):
            continue  # a live writer (possibly another thread of this process) still owns it
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def temp_path(path: str | os.PathLike[str], *, suffix: str = ".tmp", hidden: bool = True) -> Path:
    """A fresh temporary file beside ``path`` (created empty, our naming); stale ones are removed first.

    ``suffix``: for writers that infer the format from the name (matplotlib); ``hidden=False`` for
    readers that skip dot-files."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path)
    prefix = ("." if hidden else "") + f"{path.name}{_TMP_MARK}{os.getpid()}-"
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    os.close(fd)
    return Path(tmp)


def commit_temp(tmp: str | os.PathLike[str], path: str | os.PathLike[str], *, sync_dir: bool = True) -> Path:
    """fsync ``tmp``, give it umask permissions and rename it over ``path`` (atomic on POSIX)."""
    tmp, path = Path(tmp), Path(path)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
    if sync_dir:
        _fsync_dir(path.parent if str(path.parent) else Path("."))
    return path


def discard_temp(tmp: str | os.PathLike[str] | None) -> None:
    if tmp is None:
        return
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


class AtomicFiles:
    """The one atomic-write mechanism: temporary files beside each target, renamed over them together.

    ``with AtomicFiles([a, b]) as (ta, tb): <write ta and tb completely>`` renames ``ta`` -> ``a``,
    then ``tb`` -> ``b`` (the order given: put the file that vouches for the others last, as a
    manifest), after an fsync of each. An exception before the renames removes the temporary files
    and leaves every target as it was; an exception during the renames puts back the targets already
    replaced (from hard-linked backups). A kill between two renames can leave the earlier targets
    new and the later ones old, which is why the last file should name the others' hashes.
    Also usable without ``with`` (a writer that fills its files over many calls): :meth:`commit`,
    :meth:`discard`.
    """

    def __init__(self, targets, *, suffix: str = ".tmp", hidden: bool = True):
        self.targets = [Path(t) for t in targets]
        self.temps: list[Path] = []
        try:
            for t in self.targets:
                self.temps.append(temp_path(t, suffix=suffix, hidden=hidden))
        except BaseException:
            self.discard()
            raise
        self.done = False

    def commit(self) -> list[Path]:
        if self.done:
            raise RuntimeError("atomic files already committed or discarded")
        backups: list[Path | None] = []
        replaced: list[Path] = []
        try:
            for tmp, target in zip(self.temps, self.targets):
                backups.append(_link_backup(target))
                commit_temp(tmp, target, sync_dir=False)
                replaced.append(target)
        except BaseException:
            for target, backup in reversed(list(zip(replaced, backups))):
                if backup is not None:
                    os.replace(backup, target)
                else:
                    discard_temp(target)  # it did not exist before this commit
            self.discard()
            raise
        finally:
            for backup in backups:
                discard_temp(backup)
        self.done = True
        for d in {t.parent if str(t.parent) else Path(".") for t in self.targets}:
            _fsync_dir(d)
        return self.targets

    def discard(self) -> None:
        for tmp in self.temps:
            discard_temp(tmp)
        self.done = True

    def __enter__(self) -> list[Path]:
        return list(self.temps)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def _link_backup(target: Path) -> Path | None:
    """A hard link to ``target`` (no copy), to put it back if a later rename of the group fails."""
    if not target.is_file():
        return None
    backup = temp_path(target)
    os.unlink(backup)
    try:
        os.link(target, backup)
    except OSError:
        return None  # a file system without hard links: a failure there is still detected by hashes
    return backup


@contextmanager
def atomic_write(path: str | os.PathLike[str], *, suffix: str = ".tmp", hidden: bool = True) -> Iterator[Path]:
    """``with atomic_write(path) as tmp: <write tmp>``: ``tmp`` replaces ``path`` on a clean exit
    (fsync, rename), and is removed on an exception, leaving ``path`` as it was."""
    with AtomicFiles([path], suffix=suffix, hidden=hidden) as (tmp,):
        yield tmp


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """``text`` (UTF-8) to ``path`` through :func:`atomic_write`; parent folders are created."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


@contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """``with atomic_dir(folder) as tmp: <fill the folder tmp>``: on a clean exit ``tmp`` replaces
    ``folder`` whole (an existing one is removed first: a folder cannot be renamed over a full one,
    so a kill there leaves no folder, never a half one); on an exception ``tmp`` is removed."""
    import shutil

    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}{_TMP_MARK}{os.getpid()}-", suffix=".tmp", dir=directory))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        _fsync_dir(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
    """Read a records Parquet file into a list of plain python dicts (lists, dicts, str, ...).

    Pandas index columns (``__index_level_*``) are dropped. With ``validate`` (default) the rows are
    checked and a :class:`RecordError` naming the file is raised if they break the contract.
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
    rows = [to_python(r) for r in table.to_pylist()]
    if validate:
        try:
            validate_rows(rows)
        except RecordError as exc:
            raise RecordError(exc.issues, header=f"records in {path} break the contract",
                              hint=fix_hint(path, exc.issues)) from None
    return rows


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


def iter_records(path: str | os.PathLike[str], *, batch_rows: int = 4096, columns: list[str] | None = None):
    """Rows of a records file as plain python dicts, in batches (lists) of ``batch_rows``: memory is
    bounded by one batch. Not validated here (a version writer validates what it writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = check_input(path, "records file")
    try:
        pf = pq.ParquetFile(path)
        names = [n for n in pf.schema_arrow.names if not n.startswith("__index_level_")]
        if columns is not None:
            names = [n for n in names if n in columns]
        for batch in pf.iter_batches(batch_size=batch_rows, columns=names):
            yield batch.to_pylist()  # plain python values already (no numpy: that is pandas)
    except (pa.ArrowException, OSError) as exc:
        raise RecordError(f"cannot read {path} as a Parquet records file: {exc}") from exc


def records_schema_of(path: str | os.PathLike[str]):
    """The records schema for rows read from ``path``: the standard fields with their standard types,
    plus the file's own extra metadata fields with the file's types (so that a stream of batches
    keeps one schema even where its first batch holds only nulls)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(check_input(path, "records file"))

    def extras(name: str, standard) -> dict:
        if name not in schema.names or not hasattr(schema.field(name).type, "num_fields"):
            return {}
        t = schema.field(name).type
        return {t.field(i).name: t.field(i).type for i in range(t.num_fields) if t.field(i).name not in standard}

    cols = {n: schema.field(n).type for n in schema.names
            if n not in _KNOWN_COLUMNS and not n.startswith("__index_level_")}
    return records_schema(extras(EXTRA_INFO, EXTRA_INFO_STANDARD), extras(SIMULATION, SIMULATION_FIELDS), cols)
