"""Label-state transforms for experiments: hide labels to simulate an unlabeled or semi-supervised pool."""

from __future__ import annotations

import copy
import hashlib
import heapq
import os
from typing import Any, Sequence

from .schema import UNLABELED_SOURCE

RULE = "hide-labels"


def _rank(seed: int, key: str) -> str:
    return hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()


def _check_fraction(labeled_fraction: float) -> None:
    if not isinstance(labeled_fraction, (int, float)) or not 0.0 <= labeled_fraction <= 1.0:
        raise ValueError(f"labeled_fraction must lie in [0, 1], got {labeled_fraction}")


def kept_keys(labeled_keys: Sequence[str], labeled_fraction: float, seed: int = 0) -> set[str]:
    """The keys that stay labeled: the ``round(labeled_fraction * n)`` smallest ranks sha1(seed:key).

    Depends only on (seed, key set), not on row order, so the same key keeps its label state when
    the file is re-ordered or extended.
    """
    _check_fraction(labeled_fraction)
    keep = round(labeled_fraction * len(labeled_keys))
    return set(heapq.nsmallest(keep, labeled_keys, key=lambda k: _rank(seed, k)))


def hide_row(row: dict[str, Any]) -> dict[str, Any]:
    """A copy of a labeled row made unlabeled; its target moves to ``simulation.hidden_answer``.

    The structs it changes are copied; the rest (the prompt) is shared with ``row``, not mutated."""
    r = dict(row)
    r["reward_model"] = dict(row["reward_model"])
    r["extra_info"] = dict(row["extra_info"])
    target = r["reward_model"]["ground_truth"]
    sim = dict(r.get("simulation") or {"noise": "none"})
    if sim.get("hidden_answer") is None:
        sim["hidden_answer"] = target
    sim.setdefault("noise", "none")
    r["simulation"] = sim
    r["reward_model"]["ground_truth"] = ""
    r["extra_info"]["labeled"] = False
    r["extra_info"]["label_source"] = UNLABELED_SOURCE
    return r


def hide_labels(rows: Sequence[dict[str, Any]], labeled_fraction: float, seed: int = 0) -> list[dict[str, Any]]:
    """Copy of ``rows`` where only ``round(labeled_fraction * n_labeled)`` labeled rows keep their target.

    Which rows stay labeled: :func:`kept_keys`. A hidden target moves to ``simulation.hidden_answer``
    (diagnostics only); the row becomes ``labeled=False``, ``label_source="none"``, ``ground_truth=""``.
    """
    _check_fraction(labeled_fraction)
    kept = kept_keys([r["extra_info"]["index"] for r in rows if r["extra_info"]["labeled"]], labeled_fraction, seed)
    return [copy.deepcopy(hide_row(r)) if r["extra_info"]["labeled"] and r["extra_info"]["index"] not in kept
            else copy.deepcopy(r) for r in rows]


def hide_labels_file(input: str | os.PathLike[str], out: str | os.PathLike[str], labeled_fraction: float,
                     seed: int = 0, *, force: bool = False, batch_rows: int = 4096, progress: bool | None = None):
    """:func:`hide_labels` from one records file to a new dataset version (Parquet + manifest), streaming.

    Two passes over ``input`` in batches (the labeled keys, then the rows), so memory is one batch
    plus the labeled keys. Every hidden row is listed in the manifest. Returns the Manifest.
    """
    from tqdm import tqdm

    from .io import iter_records, record_file_rows, records_schema_of
    from .versions import VersionWriter, check_output, row_changes

    _check_fraction(labeled_fraction)
    check_output(out, [input], force=force)
    total = record_file_rows(input)
    labeled = [k for batch in iter_records(input, batch_rows=batch_rows, columns=["extra_info"])
               for k, lab in ((r["extra_info"].get("index"), r["extra_info"].get("labeled")) for r in batch) if lab is True]
    kept = kept_keys(labeled, labeled_fraction, seed)
    why = f"hidden: not among the {len(kept)} of {len(labeled)} labeled rows kept (fraction {labeled_fraction:g}, seed {seed})"
    config = {"labeled_fraction": labeled_fraction, "seed": seed}
    bar = tqdm(total=total, desc=RULE, unit=" rows", disable=None if progress is None else not progress,
               mininterval=0.5, leave=False)
    try:
        with VersionWriter(out, rule=RULE, config=config, parents=[input], force=force,
                           schema=records_schema_of(input)) as w:
            for batch in iter_records(input, batch_rows=batch_rows):
                new = []
                for r in batch:
                    if r["extra_info"].get("labeled") is True and r["extra_info"]["index"] not in kept:
                        h = hide_row(r)
                        w.add_changes(row_changes(r, h, why))
                        new.append(h)
                    else:
                        new.append(r)
                w.write(new)
                bar.update(len(batch))
    finally:
        bar.close()
    return w.manifest
