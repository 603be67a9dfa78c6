"""Subsets of a records file, each a new dataset version (``devenus data head / filter / split``).

- :func:`head_file`: the first ``n`` rows;
- :func:`filter_file`: the rows a :class:`Where` keeps (typed conditions on ``extra_info``: source,
  split, label state, a list of keys; no expressions are evaluated);
- :func:`split_file`: every row in exactly one of several parts, by fractions. A row's part depends only
  on (seed, its key): the keys are ranked by sha1(seed:key) and cut at the cumulative fractions, so
  the parts' sizes are exact and a re-ordered file splits the same way.

Rows are copied unchanged. Each output is written through :class:`.versions.VersionWriter` (Parquet,
manifest naming the parent and the rule's config, every row left out listed in the change file),
atomically, after every output was checked against the output rule.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .schema import EXTRA_INFO

__all__ = ["Where", "head_file", "filter_file", "split_keys", "split_file", "LABEL_STATES"]

LABEL_STATES = ("labeled", "unlabeled")
_PathLike = str | os.PathLike[str]


def _key(row: dict[str, Any]) -> Any:
    return (row.get(EXTRA_INFO) or {}).get("index")


def _write(input: _PathLike, out: _PathLike, rule: str, config: dict[str, Any], keep, why: str, *,
           force: bool, batch_rows: int = 4096):
    """Stream ``input`` into the version ``out`` with the rows ``keep(position, row)`` accepts; the others
    are listed as removed (``why``)."""
    from .io import iter_records, records_schema_of
    from .versions import VersionError, VersionWriter

    with VersionWriter(out, rule=rule, config=config, parents=[input], force=force,
                       schema=records_schema_of(input)) as w:
        pos = written = 0
        for batch in iter_records(input, batch_rows=batch_rows):
            kept = []
            for row in batch:
                if keep(pos, row):
                    kept.append(row)
                else:
                    w.remove(str(_key(row)), why)
                pos += 1
            w.write(kept)
            written += len(kept)
        if written == 0:
            raise VersionError(f"no row of {input} is kept ({why}): nothing to write to {out}")
    return w.manifest


# ------------------------------------------------------------------------------------------------- head
def head_rows(input: _PathLike, n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of a records file (reads only as many batches as it takes)."""
    from .io import iter_records

    _check_count(n)
    out: list[dict[str, Any]] = []
    for batch in iter_records(input, batch_rows=min(max(n, 1), 4096)):
        out += batch[: n - len(out)]
        if len(out) >= n:
            break
    return out


def _check_count(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"-n must be an integer >= 1, got {n!r}")


def head_file(input: _PathLike, out: _PathLike, n: int, *, force: bool = False):
    """The first ``n`` rows of ``input`` as the version ``out``; returns its Manifest."""
    from .versions import check_output

    _check_count(n)
    check_output(out, [input], force=force)
    return _write(input, out, "head", {"n": n}, lambda pos, row: pos < n, f"after the first {n} rows", force=force)


# ----------------------------------------------------------------------------------------------- filter
@dataclass(frozen=True)
class Where:
    """Conditions on ``extra_info``, all of which a kept row meets (an empty one keeps every row):
    ``source`` / ``split`` among the given names, ``label_state`` labeled or unlabeled, the key among
    ``ids``."""

    sources: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()
    label_state: str | None = None
    ids: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.label_state is not None and self.label_state not in LABEL_STATES:
            raise ValueError(f"label state must be one of {', '.join(LABEL_STATES)}, got {self.label_state!r}")

    def __call__(self, row: dict[str, Any]) -> bool:
        info = row.get(EXTRA_INFO) or {}
        return ((not self.sources or info.get("source") in self.sources)
                and (not self.splits or info.get("split") in self.splits)
                and (self.label_state is None or (info.get("labeled") is True) == (self.label_state == "labeled"))
                and (self.ids is None or info.get("index") in self.ids))

    def config(self) -> dict[str, Any]:
        """The manifest's record of the conditions (the keys by count and hash: a list can be long)."""
        out: dict[str, Any] = {}
        if self.sources:
            out["source"] = list(self.sources)
        if self.splits:
            out["split"] = list(self.splits)
        if self.label_state:
            out["label_state"] = self.label_state
        if self.ids is not None:
            joined = "\n".join(sorted(self.ids)).encode()
            out["ids"] = {"count": len(self.ids), "sha256": hashlib.sha256(joined).hexdigest()}
        return out

    def describe(self) -> str:
        parts = [f"source in {list(self.sources)}"] if self.sources else []
        parts += [f"split in {list(self.splits)}"] if self.splits else []
        parts += [self.label_state] if self.label_state else []
        parts += [f"key among {len(self.ids)} ids"] if self.ids is not None else []
        return " and ".join(parts) or "every row"


def read_ids(path: _PathLike) -> frozenset[str]:
    """Keys (``extra_info.index``), one a line; blank lines and ``#`` comments are skipped."""
    from .io import check_input

    p = check_input(path, "ids file")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p}: not a UTF-8 text file of keys, one a line ({exc.reason} at byte {exc.start})") from None
    ids = frozenset(s for s in (ln.strip() for ln in lines) if s and not s.startswith("#"))
    if not ids:
        raise ValueError(f"{p}: no keys (expected one extra_info.index a line)")
    return ids


def filter_file(input: _PathLike, out: _PathLike, where: Where, *, force: bool = False):
    """The rows of ``input`` that ``where`` keeps, as the version ``out``; returns its Manifest."""
    from .versions import check_output

    if where == Where():
        raise ValueError("filter needs a condition (--source, --split, --label-state or --ids-file)")
    check_output(out, [input], force=force)
    return _write(input, out, "filter", where.config(), lambda pos, row: where(row),
                  f"does not match: {where.describe()}", force=force)


# ------------------------------------------------------------------------------------------------ split
def parse_fractions(text: str) -> tuple[float, ...]:
    """``0.8,0.1,0.1`` -> (0.8, 0.1, 0.1): at least two, each in (0, 1], summing to 1."""
    try:
        fr = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--fractions: expected comma-separated numbers such as 0.8,0.1,0.1, got {text!r}") from None
    if len(fr) < 2 or not all(0.0 < f <= 1.0 for f in fr) or abs(sum(fr) - 1.0) > 1e-6:
        raise ValueError(f"--fractions: expected two or more numbers in (0, 1] that sum to 1, got {text!r}")
    return fr


def split_keys(keys: Sequence[str], fractions: Sequence[float], seed: int = 0) -> dict[str, int]:
    """key -> part: keys ranked by sha1(seed:key), part i takes the ranks from round(n * (f_0 + .. +
    f_{i-1})) up to round(n * (f_0 + .. + f_i)). Depends on the key set and the seed only."""
    ranked = sorted(keys, key=lambda k: hashlib.sha1(f"{seed}:{k}".encode()).hexdigest())
    n, out, start, cum = len(ranked), {}, 0, 0.0
    for part, f in enumerate(fractions):
        cum += f
        end = n if part == len(fractions) - 1 else round(n * cum)
        for k in ranked[start:end]:
            out[k] = part
        start = end
    return out


def split_file(input: _PathLike, out_dir: _PathLike, fractions: Sequence[float], names: Sequence[str],
               seed: int = 0, *, force: bool = False) -> list[Any]:
    """Split ``input`` into ``<out_dir>/<name>.parquet`` versions (one per fraction); returns their Manifests.

    Every output is checked before any is written; each is then written atomically with its manifest."""
    from .io import iter_records
    from .versions import check_output

    if len(names) != len(fractions):
        raise ValueError(f"--names: {len(names)} names for {len(fractions)} fractions")
    if len(set(names)) != len(names) or not all(n and "/" not in n and not n.startswith(".") for n in names):
        raise ValueError(f"--names: expected distinct file names without '/', got {','.join(names)}")
    outs = [Path(out_dir) / f"{n}.parquet" for n in names]
    for o in outs:
        check_output(o, [input], force=force)
    keys = [str(_key(r)) for batch in iter_records(input, columns=[EXTRA_INFO]) for r in batch]
    part = split_keys(keys, fractions, seed)
    sizes = [sum(1 for p in part.values() if p == i) for i in range(len(fractions))]
    empty = [n for n, s in zip(names, sizes) if s == 0]
    if empty:
        raise ValueError(f"{input}: {len(keys)} rows give part {empty[0]} no row at fractions "
                         f"{','.join(f'{f:g}' for f in fractions)}")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    config = {"fractions": list(fractions), "names": list(names), "seed": seed}
    return [_write(input, o, "split", {**config, "part": name},
                   lambda pos, row, i=i: part[str(_key(row))] == i,
                   f"in another part of the split ({','.join(f'{f:g}' for f in fractions)}, seed {seed})",
                   force=force)
            for i, (name, o) in enumerate(zip(names, outs))]


def describe_rows(rows: Iterable[dict[str, Any]], width: int = 70) -> list[str]:
    """One line a row for a person: key, split, label state, target, the last user message (shortened)."""
    lines = []
    for r in rows:
        info = r.get(EXTRA_INFO) or {}
        msgs = [m for m in (r.get("prompt") or []) if isinstance(m, dict) and m.get("role") == "user"]
        text = " ".join(str(msgs[-1].get("content", "")).split()) if msgs else ""
        text = text if len(text) <= width else text[: width - 3] + "..."
        target = (r.get("reward_model") or {}).get("ground_truth")
        state = "labeled" if info.get("labeled") else "unlabeled"
        lines.append(f"{info.get('index')}\t{info.get('split')}\t{state}\t{target!r}\t{text}")
    return lines
