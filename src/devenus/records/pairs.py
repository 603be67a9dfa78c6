"""Paired views of a question (Co-rewarding): merge an original file and its rewrites by ``pair_key``.

Every original row has exactly one rewrite; both carry the same ``extra_info.pair_key`` (and different
``extra_info.index`` keys). The merged file holds each original immediately followed by its rewrite,
in the original file's order, so a sequential reader already sees the views side by side; the pair
sampler (``devenus.adapters.verl.samplers.PairSampler``) keeps them in the same batch when shuffling.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any, Sequence

MAX_NAMED = 10


def _named(keys: Sequence[str]) -> str:
    keys = sorted(keys)
    shown = ", ".join(repr(k) for k in keys[:MAX_NAMED])
    return shown + (f" ... ({len(keys) - MAX_NAMED} more)" if len(keys) > MAX_NAMED else "")


def _pair_key(row: dict[str, Any]) -> str | None:
    pk = (row.get("extra_info") or {}).get("pair_key")
    return None if pk in (None, "") else str(pk)


def pair_problems(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Why ``rows`` is not a set of complete pairs (empty when every pair_key is held by exactly two rows)."""
    problems = []
    no_key = [r["extra_info"]["index"] for r in rows if _pair_key(r) is None]
    if no_key:
        problems.append(f"{len(no_key)} row(s) without extra_info.pair_key: {_named(no_key)}")
    counts = Counter(k for k in (_pair_key(r) for r in rows) if k is not None)
    alone = [k for k, c in counts.items() if c == 1]
    crowded = [k for k, c in counts.items() if c > 2]
    if alone:
        problems.append(f"{len(alone)} pair_key(s) with no partner row: {_named(alone)}")
    if crowded:
        problems.append(f"{len(crowded)} pair_key(s) held by more than two rows: {_named(crowded)}")
    return problems


def pair_views(
    originals: Sequence[dict[str, Any]],
    rewrites: Sequence[dict[str, Any]],
    original_view: str = "original",
    rewrite_view: str = "paraphrase",
) -> list[dict[str, Any]]:
    """Originals interleaved with their rewrites (original, rewrite, original, rewrite, ...).

    Raises :class:`ValueError` naming the offending keys when a row has no pair_key, a pair_key occurs
    twice in one file, an original has no rewrite, a rewrite has no original, or both views share an
    ``extra_info.index``. ``extra_info.view`` is filled in (``original_view`` / ``rewrite_view``) where
    it is empty. The inputs are not modified.
    """
    errors = []
    by_file = {}
    for name, rows in (("original", originals), ("rewrite", rewrites)):
        no_key = [r["extra_info"]["index"] for r in rows if _pair_key(r) is None]
        if no_key:
            errors.append(f"{len(no_key)} {name} row(s) without extra_info.pair_key: {_named(no_key)}")
        counts = Counter(k for k in (_pair_key(r) for r in rows) if k is not None)
        dup = [k for k, c in counts.items() if c > 1]
        if dup:
            errors.append(f"{len(dup)} pair_key(s) occur more than once among the {name}s: {_named(dup)}")
        by_file[name] = {_pair_key(r): r for r in rows if _pair_key(r) is not None}
    orig, rew = by_file["original"], by_file["rewrite"]
    no_rewrite = [k for k in orig if k not in rew]
    no_original = [k for k in rew if k not in orig]
    if no_rewrite:
        errors.append(f"{len(no_rewrite)} original(s) without a rewrite, pair_key(s): {_named(no_rewrite)}")
    if no_original:
        errors.append(f"{len(no_original)} rewrite(s) without an original, pair_key(s): {_named(no_original)}")
    same_index = [k for k in orig if k in rew and orig[k]["extra_info"]["index"] == rew[k]["extra_info"]["index"]]
    if same_index:
        errors.append(f"{len(same_index)} pair(s) whose views share extra_info.index, pair_key(s): {_named(same_index)}")
    if errors:
        raise ValueError("cannot pair the views:\n  " + "\n  ".join(errors))

    out = []
    for r in originals:
        k = _pair_key(r)
        for row, view in ((r, original_view), (rew[k], rewrite_view)):
            row = copy.deepcopy(row)
            if not row["extra_info"].get("view"):
                row["extra_info"]["view"] = view
            out.append(row)
    return out


def pair_with_rewrites(originals: Sequence[dict[str, Any]], rewrites: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`pair_views` of ``originals`` and their rewrites (those of ``rewrites`` whose pair_key an original
    holds), each rewrite given its original's label state: hidden (:func:`~devenus.records.hide_labels`) where
    the original's target is, so a pair is labeled or unlabeled as one."""
    from .labels import hide_labels

    keys = {_pair_key(r) for r in originals}
    hidden = {_pair_key(r) for r in originals if not r["extra_info"]["labeled"]}
    mine = [r for r in rewrites if _pair_key(r) in keys]
    return pair_views(originals, hide_labels([r for r in mine if _pair_key(r) in hidden], 0.0)
                      + [r for r in mine if _pair_key(r) not in hidden])


def pair_view_files(original: str, rewrite: str, out: str, *, force: bool = False) -> list[dict[str, Any]]:
    """Read both record files, pair them (:func:`pair_views`) and write the dataset version ``out``
    (Parquet + manifest; parents: both files; changes: every ``extra_info.view`` filled in).
    Returns the rows."""
    from .io import read_records
    from .versions import check_output, row_changes, write_version

    check_output(out, [original, rewrite], force=force)
    originals, rewrites = read_records(original), read_records(rewrite)
    rows = pair_views(originals, rewrites)
    before = {r["extra_info"]["index"]: r for r in (*originals, *rewrites)}
    changes = [c for r in rows for c in row_changes(before[r["extra_info"]["index"]], r, "view filled in by pair-views")]
    # write_version validates the merged rows (e.g. an index shared across the two files)
    write_version(rows, out, rule="pair-views", config={}, parent=[original, rewrite], changes=changes, force=force)
    return rows
