"""Writing files atomically: the one module of the tree that renames a file.

A writer fills a temporary file beside its target (:func:`temp_path`), then :func:`commit_temp`
fsyncs it, gives it umask permissions and renames it over the target with :func:`os.replace`; an
exception before the rename leaves the target as it was and removes the temporary file.
:class:`AtomicFiles` does this for several targets together (a manifest last), :func:`atomic_write`
for one, :func:`write_text_atomic` for a text, :func:`atomic_dir` for a whole folder. A temporary file
left by a killed writer is recognised by its name and removed by the next write to the same target
(:func:`clean_stale_temps`).

This module imports no other devenus module: every package may write through it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
    except OSError:
        pass  # exists but belongs to someone else (PermissionError): not ours to judge
    return True


def clean_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Remove temporary files (or folders) of our own naming for ``path`` whose writing process is gone.

    Returns the removed paths. Files of other processes still running (and of this one) are kept.
    """
    import shutil

    path = Path(path)
    removed = []
    prefixes = (f".{path.name}{_TMP_MARK}", f"{path.name}{_TMP_MARK}")
    try:
        candidates = [(p, pre) for p in path.parent.iterdir() for pre in prefixes if p.name.startswith(pre)]
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
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path)
    prefix = ("." if hidden else "") + f"{path.name}{_TMP_MARK}{os.getpid()}-"
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=path.parent)
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
        _fsync_dir(path.parent)
    return path


def discard_temp(tmp: str | os.PathLike[str] | None) -> None:
    if tmp is not None:
        Path(tmp).unlink(missing_ok=True)


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
        for d in {t.parent for t in self.targets}:
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
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}{_TMP_MARK}{os.getpid()}-", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
