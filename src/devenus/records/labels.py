"""The label vocabulary: hide, annotate, promote, correct, as column-wise edits of an Arrow table.

Every edit of a row's label state in the tree goes through here (the selection materializer, the
transition rules, ``data hide-labels``, the testbed pool), each returning the new table and its
changes for the version's manifest:

=========  ====================================================  ==========================================
edit       the row afterwards                                    precondition
=========  ====================================================  ==========================================
hide       ``ground_truth=""``, ``labeled=False``, ``none``;      none (an unlabeled row stays as it is)
           the old target kept as ``simulation.hidden_answer``
annotate   ``ground_truth=answer``, ``labeled=True``,             the row is unlabeled
           ``annotated``
promote    the same with ``promoted``                              the row is unlabeled
correct    the same with ``corrected``                             the row is labeled
=========  ====================================================  ==========================================

``hide_table(table, mask, why) -> (table, changes)``, ``annotate_table(table, mask, answers, why)``,
``promote_table(...)``, ``correct_table(...)`` (``relabel_table(..., source)``: the three by label source,
as a transition rule applies its accepted proposals): no Python step per row; ``changes`` is a table ``row``,
``key``, ``field``, ``line`` (each :class:`.versions.Change` as its manifest JSON line, for
:meth:`.versions.VersionWriter.add_change_lines`), by row and within a row by sorted field path.
``why``: a string, or a string array with one entry per row.

Callers that hold row dicts go through the same edits: :func:`hide_labels` (rows in memory, a
fraction of them hidden) makes a table of its rows (:func:`.io.records_to_table`) and reads the edited
rows back.
"""

from __future__ import annotations

import hashlib
import heapq
import os
from typing import Any, Sequence

from .column_rules import _flat, _np
from .schema import EXTRA_INFO, REWARD_MODEL, SIMULATION, UNLABELED_SOURCE

RULE = "hide-labels"
ANNOTATED, PROMOTED, CORRECTED = "annotated", "promoted", "corrected"


class LabelStateError(ValueError):
    """A label edit asked of a row in the wrong state (promoting a labeled row, correcting an unlabeled one)."""


# ---------------------------------------------------------------------------------------------------
# Arrow tables
# ---------------------------------------------------------------------------------------------------
def _mask(table, mask):
    """``mask`` as a boolean numpy array of the table's length (nulls: False)."""
    import numpy as np
    import pyarrow as pa

    m = _np(mask) if isinstance(mask, (pa.Array, pa.ChunkedArray)) else np.asarray(mask, dtype=bool)
    if len(m) != table.num_rows:
        raise ValueError(f"the mask has {len(m)} entries for a table of {table.num_rows} rows")
    return m


def struct_with(col, replace: dict):
    """The struct column ``col`` with some fields replaced (children read through the struct's nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = _flat(col)
    children = []
    for f in col.type:
        v = replace.get(f.name)
        children.append(_flat(pc.struct_field(col, f.name) if v is None else v))
    return pa.StructArray.from_arrays(children, fields=list(col.type), mask=col.is_null() if col.null_count else None)


def _with_hidden_answers(table, hide, gt):
    """Where ``hide``: a simulation struct that holds ``gt`` as its hidden answer unless it has one
    (a row without a simulation gets ``noise: none``); elsewhere the simulation as it was."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .schema import records_schema

    i = table.schema.get_field_index(SIMULATION)
    sim = _flat(table.column(i)) if i >= 0 else pa.nulls(table.num_rows, records_schema().field(SIMULATION).type)
    if pa.types.is_null(sim.type):
        sim = pa.nulls(table.num_rows, records_schema().field(SIMULATION).type)
    names = [f.name for f in sim.type]
    fields = list(sim.type) + [pa.field(n, pa.string()) for n in ("hidden_answer", "noise") if n not in names]
    had = pc.is_valid(sim)
    children = []
    for f in fields:
        old = pc.struct_field(sim, f.name) if f.name in names else pa.nulls(len(sim), f.type)
        if f.name == "hidden_answer":
            v = pc.if_else(hide, pc.coalesce(old, gt), old)
        elif f.name == "noise":
            v = pc.if_else(pc.and_(hide, pc.invert(had)), pa.scalar("none"), old)
        else:
            v = old
        children.append(_flat(v))
    new = pa.StructArray.from_arrays(children, fields=fields, mask=pc.invert(_flat(pc.or_(had, hide))))
    return table.set_column(i, SIMULATION, new) if i >= 0 else table.append_column(SIMULATION, new)


def _set_labels(table, pm, gt, labeled, source):
    """``table`` with the target, ``labeled`` and ``label_source`` of the rows the boolean array ``pm``
    selects set to ``gt``, ``labeled`` and ``source`` (a value, or an array with one per row)."""
    import pyarrow.compute as pc

    rm, extra = table.column(REWARD_MODEL), table.column(EXTRA_INFO)

    def where(col, name, value):
        return pc.if_else(pm, value, pc.struct_field(col, name))

    t = table.set_column(table.schema.get_field_index(REWARD_MODEL), REWARD_MODEL,
                         struct_with(rm, {"ground_truth": where(rm, "ground_truth", gt)}))
    return t.set_column(t.schema.get_field_index(EXTRA_INFO), EXTRA_INFO, struct_with(
        extra, {"labeled": where(extra, "labeled", labeled), "label_source": where(extra, "label_source", source)}))


def _changes(before, after, m, why):
    """The change lines of the rows ``m`` selects, with their positions in the whole table."""
    import numpy as np
    import pyarrow as pa

    from .columnar import table_changes

    at = np.flatnonzero(m)
    idx = pa.array(at, pa.int64())
    w = why if isinstance(why, str) else _flat(why).take(idx)
    ch = table_changes(before.take(idx), after.take(idx), w)
    return ch.set_column(0, "row", pa.array(at[ch.column("row").to_numpy()], pa.int64()))


def _hide(table, m):
    """``table`` with the rows of the boolean mask ``m`` unlabeled (see :func:`hide_table`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pm = pa.array(m)
    gt = pc.struct_field(table.column(REWARD_MODEL), "ground_truth")
    new = _set_labels(table, pm, pa.scalar(""), False, pa.scalar(UNLABELED_SOURCE))
    moved = pc.and_(pm, pc.fill_null(pc.not_equal(gt, ""), False))
    if pc.any(moved).as_py():
        new = _with_hidden_answers(new, moved, gt)
    return new


def hide_table(table, mask, why):
    """The rows ``mask`` selects unlabeled, each old target kept as ``simulation.hidden_answer`` (an
    existing one wins; an unlabeled row is unchanged): ``(table, changes)``."""
    m = _mask(table, mask)
    new = _hide(table, m)
    return new, _changes(table, new, m, why)


def relabel_table(table, mask, answers, why, source):
    """The rows ``mask`` selects labeled with ``answers`` as ``source`` (:data:`ANNOTATED`,
    :data:`PROMOTED` or :data:`CORRECTED`, whose precondition every selected row must meet; ``answers``:
    one per row of the table, read where ``mask``, or one string): ``(table, changes)``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if source not in (ANNOTATED, PROMOTED, CORRECTED):
        raise ValueError(f"label source must be one of {ANNOTATED!r}, {PROMOTED!r}, {CORRECTED!r}, got {source!r}")
    m = _mask(table, mask)
    pm = pa.array(m)
    extra = table.column(EXTRA_INFO)
    labeled = _np(pc.struct_field(extra, "labeled"))
    want = source == CORRECTED  # (correct applies to labeled rows, annotate and promote to unlabeled ones)
    wrong = np.flatnonzero(m & (labeled != want))
    if wrong.size:
        key, state = pc.struct_field(extra, "index")[int(wrong[0])].as_py(), "unlabeled" if want else "labeled"
        raise LabelStateError(f"row {key!r}: cannot mark a {state} row {source} "
                              f"({source} applies to {'labeled' if want else 'unlabeled'} rows)")
    answers = pa.array([answers] * table.num_rows, pa.string()) if isinstance(answers, str) else _flat(answers)
    new = _set_labels(table, pm, answers, True, pa.scalar(source))
    return new, _changes(table, new, m, why)


def annotate_table(table, mask, answers, why):
    """The unlabeled rows ``mask`` selects labeled with an annotator's answers (``label_source=annotated``;
    ``answers``: one per row of the table, read where ``mask``, or one string): ``(table, changes)``."""
    return relabel_table(table, mask, answers, why, ANNOTATED)


def promote_table(table, mask, answers, why):
    """The unlabeled rows ``mask`` selects labeled with accepted pseudo labels (``promoted``): ``(table, changes)``."""
    return relabel_table(table, mask, answers, why, PROMOTED)


def correct_table(table, mask, answers, why):
    """The labeled rows ``mask`` selects with their targets replaced (``corrected``): ``(table, changes)``."""
    return relabel_table(table, mask, answers, why, CORRECTED)


# ---------------------------------------------------------------------------------------------------
# hiding a fraction of the labels (experiments: a semi-supervised pool from a labeled one)
# ---------------------------------------------------------------------------------------------------
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


def hide_labels(rows: Sequence[dict[str, Any]], labeled_fraction: float, seed: int = 0) -> list[dict[str, Any]]:
    """Copy of ``rows`` where only ``round(labeled_fraction * n_labeled)`` labeled rows keep their target.

    Which rows stay labeled: :func:`kept_keys`. A hidden target moves to ``simulation.hidden_answer``
    (diagnostics only); the row becomes ``labeled=False``, ``label_source="none"``, ``ground_truth=""``.
    The rows are edited as a table (:func:`hide_table`) and read back as plain dicts.
    """
    from .io import records_to_table

    _check_fraction(labeled_fraction)
    rows = list(rows)
    kept = kept_keys([r["extra_info"]["index"] for r in rows if r["extra_info"]["labeled"]], labeled_fraction, seed)
    hide = [bool(r["extra_info"]["labeled"]) and r["extra_info"]["index"] not in kept for r in rows]
    table = records_to_table(rows, validate=False)
    return _hide(table, _mask(table, hide)).to_pylist()


def hide_labels_file(input: str | os.PathLike[str], out: str | os.PathLike[str], labeled_fraction: float,
                     seed: int = 0, *, force: bool = False, batch_rows: int = 4096, progress: bool | None = None):
    """:func:`hide_labels` from one records file to a new dataset version (Parquet + manifest), streaming.

    Two passes over ``input`` in batches (the labeled keys, then the rows), so memory is one batch
    plus the labeled keys. Every hidden row is listed in the manifest. Returns the Manifest.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from tqdm import tqdm

    from .io import iter_tables, record_file_rows, records_schema_of
    from .versions import VersionWriter, check_output

    _check_fraction(labeled_fraction)
    check_output(out, [input], force=force)
    total = record_file_rows(input)
    labeled = []
    for t in iter_tables(input, batch_rows=batch_rows, columns=[EXTRA_INFO]):
        extra = t.column(EXTRA_INFO)
        labeled += pc.filter(pc.struct_field(extra, "index"), pc.equal(pc.struct_field(extra, "labeled"), True)).to_pylist()
    kept = kept_keys(labeled, labeled_fraction, seed)
    kept_keys_array = pa.array(sorted(kept), pa.string())
    why = f"hidden: not among the {len(kept)} of {len(labeled)} labeled rows kept (fraction {labeled_fraction:g}, seed {seed})"
    config = {"labeled_fraction": labeled_fraction, "seed": seed}
    bar = tqdm(total=total, desc=RULE, unit=" rows", disable=None if progress is None else not progress,
               mininterval=0.5, leave=False)
    try:
        with VersionWriter(out, rule=RULE, config=config, parents=[input], force=force,
                           schema=records_schema_of(input)) as w:
            for t in iter_tables(input, batch_rows=batch_rows):
                extra = t.column(EXTRA_INFO)
                hide = pc.and_(pc.equal(pc.struct_field(extra, "labeled"), True),
                               pc.invert(pc.is_in(pc.struct_field(extra, "index"), value_set=kept_keys_array)))
                new, changes = hide_table(t, hide, why)
                w.add_change_lines(changes)
                w.write(new)
                bar.update(t.num_rows)
    finally:
        bar.close()
    return w.manifest
