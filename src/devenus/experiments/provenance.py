"""What an experiment result was made with, and the rule that keeps results of different makings apart.

A result records:

- ``code``: :func:`code_version` of the ``devenus`` package that ran it: the git ``commit`` and a
  ``dirty`` flag (uncommitted changes under the package's source tree) when the package is imported
  from a git checkout, else ``None`` for both; the installed ``version``; and ``tree``, a hash of the
  package's files. Two results are of the same code when their ``tree`` is the same: a commit that
  touches nothing under ``src/devenus`` (results, docs) keeps the code version, and an uncommitted
  edit changes it.
- ``base_model``: the content hash of the base model's weights (:func:`devenus.testbed.shipped.model_hash`).
- ``data``: the sha256 of the training file and of each validation file.
- ``config``: what the run was configured with (see :meth:`devenus.experiments.runner.Experiment.run_one`).

Results written before these fields existed have no ``code`` (and some no ``base_model``): they load,
and count as the version ``unrecorded``. :func:`check_one_version` refuses a set of results that spans
more than one code version or more than one set of weights, unless :class:`Mixing` allows it.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

UNRECORDED = "unrecorded"


def tree_hash(root: str | Path) -> str:
    """sha256 over (relative path, bytes) of every file under ``root`` but compiled Python, 16 hex digits."""
    root = Path(root)
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts or p.suffix == ".pyc":
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def code_version(package_dir: str | Path | None = None) -> dict:
    """The code version of the ``devenus`` package (or of the package folder ``package_dir``)."""
    import importlib.metadata

    import devenus

    pkg = Path(package_dir) if package_dir is not None else Path(devenus.__file__).parent
    try:
        version = importlib.metadata.version("devenus")
    except importlib.metadata.PackageNotFoundError:
        version = getattr(devenus, "__version__", None)
    # a checkout only when git tracks the package's files (an installed copy can sit inside a repo's .venv)
    commit = _git(pkg, "rev-parse", "HEAD") if _git(pkg, "ls-files", "--", ".") else None
    # untracked files count (a new module changes the code); ignored ones (caches) do not
    dirty = None if commit is None else bool(_git(pkg, "status", "--porcelain", "--", "."))
    return {"commit": commit, "dirty": dirty, "version": version, "tree": tree_hash(pkg)}


def _git(cwd: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def code_id(record: Mapping) -> str:
    """The code version two results must share to be paired: the package tree's hash, or ``unrecorded``."""
    code = record.get("code")
    return code["tree"] if code else UNRECORDED


def code_label(record: Mapping) -> str:
    """The code version for a reader: ``commit 1a2b3c4d5e6f (dirty; tree ...)``."""
    code = record.get("code")
    if not code:
        return UNRECORDED
    if code.get("commit"):
        return f"commit {code['commit'][:12]} ({'dirty; ' if code.get('dirty') else ''}tree {code['tree']})"
    return f"devenus {code.get('version')} (no git checkout; tree {code['tree']})"


def weights_id(record: Mapping) -> str:
    """The base model's weights a result trained: their content hash, or ``unrecorded``."""
    return record.get("base_model") or UNRECORDED


@dataclass(frozen=True)
class Mixing:
    """What one table may mix; both are refused unless allowed (``--allow-mixed-code``,
    ``--allow-mixed-weights``). Allowed mixed weights still pair only runs of the same weights."""

    code: bool = False
    weights: bool = False

    @staticmethod
    def add_flags(parser) -> None:
        """The two flags, for a command's argparse parser (``devenus experiment``)."""
        parser.add_argument("--allow-mixed-code", action="store_true",
                            help="tabulate and pair results of different code versions together")
        parser.add_argument("--allow-mixed-weights", action="store_true",
                            help="tabulate results of different base-model weights together")

    @classmethod
    def from_args(cls, args) -> "Mixing":
        return cls(code=args.allow_mixed_code, weights=args.allow_mixed_weights)


class MixedResults(ValueError):
    """A set of results spans code versions or weights that were not allowed to mix."""


def check_one_version(records: Mapping[tuple[str, int], Mapping], mixing: Mixing = Mixing(), what: str = "") -> None:
    """Raise :class:`MixedResults` (one line: both versions and the runs of each) when ``records`` span more
    than one code version or set of weights that ``mixing`` does not allow."""
    for kind, ident, allowed, flag in (("code versions", code_id, mixing.code, "--allow-mixed-code"),
                                       ("base-model weights", weights_id, mixing.weights, "--allow-mixed-weights")):
        groups = version_groups(records, ident)
        if len(groups) < 2 or allowed:
            continue
        label = code_label if ident is code_id else weights_id
        named = [f"{label(records[keys[0]])} ({runs_text(keys)})" for keys in list(groups.values())[:2]]
        more = f" and {len(groups) - 2} more" if len(groups) > 2 else ""
        raise MixedResults(f"{what + ': ' if what else ''}results of {len(groups)} {kind}: {named[0]} vs {named[1]}{more}; "
                           f"pass {flag} to tabulate and pair them together")


def version_groups(records: Mapping[tuple[str, int], Mapping], ident=code_id) -> dict[str, list[tuple[str, int]]]:
    """Version -> the (arm, seed) keys of its results, in order of each version's first seed."""
    out: dict[str, list[tuple[str, int]]] = {}
    for key in sorted(records, key=lambda k: (k[1], k[0])):
        out.setdefault(ident(records[key]), []).append(key)
    return dict(sorted(out.items(), key=lambda kv: (min(s for _, s in kv[1]), kv[0])))


def runs_text(keys: list[tuple[str, int]], limit: int = 6) -> str:
    """``base s0,1; grpo s0`` for a list of (arm, seed) keys, the first ``limit`` arms named."""
    by_arm: dict[str, list[int]] = {}
    for name, seed in keys:
        by_arm.setdefault(name, []).append(seed)
    parts = [f"{name} s{','.join(map(str, sorted(seeds)))}" for name, seeds in sorted(by_arm.items())]
    return "; ".join(parts[:limit]) + (f"; +{len(parts) - limit} more arms" if len(parts) > limit else "")


def file_hashes(files: Mapping[str, str | Path]) -> dict[str, dict]:
    """Name -> {path, sha256} of each file (the records' hashing helper)."""
    from devenus.records.versions import sha256_file

    return {k: {"path": str(p), "sha256": sha256_file(p)} for k, p in files.items()}
