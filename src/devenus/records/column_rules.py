"""The record contract as rules over whole Arrow columns: the table layouts they cover (:func:`covered`)
and the rows they flag (:func:`flag_rows`), with no Python step per row.

They only pick rows: :func:`devenus.records.validate.find_table_issues` has each flagged row named by
its row checker (its position and key, the field, what was expected and what was found).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .schema import (
    EXTRA_INFO,
    EXTRA_INFO_OPTIONAL,
    EXTRA_INFO_REQUIRED,
    EXTRA_INFO_STANDARD,
    LABEL_SOURCES,
    MESSAGE_FIELDS,
    METHOD_COLUMNS,
    NOISE_KINDS,
    PY_WHITESPACE,
    REWARD_MODEL_FIELDS,
    REWARD_STYLE,
    ROLES,
    SIMULATION,
    SIMULATION_FIELDS,
    UNLABELED_SOURCE,
)


def _is_str(t) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_plain(t) -> bool:
    """A type whose Python values are all of one category the row checker accepts for free-form
    metadata (bool, int, float, str, list, dict) or None."""
    import pyarrow as pa

    return (pa.types.is_null(t) or pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t)
            or _is_str(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t))


def _fields(t) -> dict[str, Any]:
    return {t.field(i).name: t.field(i).type for i in range(t.num_fields)}


def covered(schema) -> bool:
    """Whether the column rules cover this layout (else :func:`~devenus.records.validate.find_table_issues` uses the row checker)."""
    import pyarrow as pa

    def struct(t) -> dict[str, Any] | None:
        """A struct type's fields; None where ``t`` is no struct or repeats a field name."""
        return _fields(t) if pa.types.is_struct(t) and len(_fields(t)) == t.num_fields else None

    def strings(t, names) -> bool:
        """Whether ``t`` is a struct of exactly the string fields ``names``."""
        f = struct(t)
        return f is not None and set(f) == set(names) and all(_is_str(x) for x in f.values())

    names = schema.names
    if len(set(names)) != len(names) or any(c not in names for c in METHOD_COLUMNS):
        return False
    t = {n: schema.field(n).type for n in names}
    p, ef = t["prompt"], struct(t[EXTRA_INFO])
    if not (_is_str(t["data_source"]) and _is_str(t["ability"]) and (pa.types.is_list(p) or pa.types.is_large_list(p))
            and strings(p.value_type, MESSAGE_FIELDS) and strings(t["reward_model"], REWARD_MODEL_FIELDS)
            and ef is not None):
        return False
    for name, py in EXTRA_INFO_REQUIRED.items():
        if name not in ef or not (pa.types.is_boolean(ef[name]) if py is bool else _is_str(ef[name])):
            return False
    for name, py in EXTRA_INFO_OPTIONAL.items():
        want = pa.types.is_integer if py is int else _is_str
        if name in ef and not pa.types.is_null(ef[name]) and not want(ef[name]):
            return False
    if not all(_is_plain(x) for k, x in ef.items() if k not in EXTRA_INFO_STANDARD):
        return False
    if SIMULATION in t and not pa.types.is_null(t[SIMULATION]):
        sf = struct(t[SIMULATION])
        if sf is None or not all(pa.types.is_null(sf[n]) or _is_str(sf[n]) for n in SIMULATION_FIELDS if n in sf):
            return False
        if not all(_is_plain(x) for k, x in sf.items() if k not in SIMULATION_FIELDS):
            return False
    return all(_is_plain(x) for k, x in t.items() if k not in METHOD_COLUMNS and k != SIMULATION)


def _flat(x):
    """An Arrow array as one array (a chunked one combined)."""
    import pyarrow as pa

    return x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x


def _np(mask) -> np.ndarray:
    """A boolean Arrow array (nulls -> False) as numpy."""
    import pyarrow.compute as pc

    return _flat(pc.fill_null(mask, False)).to_numpy(zero_copy_only=False)


def _blank(col):
    """True where a string is null or empty after ``str.strip()``: a string whose first character is
    not whitespace is not blank, so only the others (few, or none) are trimmed whole."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = _flat(col)
    head = pc.utf8_trim(pc.utf8_slice_codeunits(col, 0, 1), characters=PY_WHITESPACE)
    maybe = _np(pc.or_kleene(pc.is_null(col), pc.equal(pc.binary_length(head), 0)))
    if not maybe.any():
        return pa.array(maybe)
    maybe = maybe.copy()  # (writable)
    rows = pa.array(np.flatnonzero(maybe))
    sub = col.take(rows)
    maybe[rows.to_numpy()] = _np(pc.or_kleene(pc.is_null(sub), pc.equal(pc.binary_length(pc.utf8_trim(sub, characters=PY_WHITESPACE)), 0)))
    return pa.array(maybe)


def flag_rows(table, flagged=None) -> tuple[np.ndarray, dict[str, int]]:
    """``(bad, seen)`` for a table of a layout :func:`covered` accepts: ``bad`` marks the rows that break a
    rule (and those the boolean array ``flagged`` marks); ``seen`` holds the first occurrences, unmarked,
    of the keys a marked row repeats (the row checker counts them as seen when it names the repeats)."""
    import pyarrow.compute as pc

    table = table.combine_chunks()
    col = {name: table.column(name).chunk(0) if table.column(name).num_chunks else table.column(name)
           for name in table.column_names}
    index = pc.struct_field(col[EXTRA_INFO], "index")
    index_blank = _np(_blank(index))
    bad = index_blank.copy()
    if flagged is not None:
        bad |= flagged
    bad |= _np(_blank(col["data_source"]))
    bad |= _np(_blank(col["ability"]))
    _flag_prompts(col["prompt"], bad)
    for mask in _label_masks(col):  # (one at a time: a mask is freed before the next is made)
        bad |= _np(mask)
    seen = _flag_duplicates(index, index_blank, bad)
    return bad, seen


def _flag_prompts(prompt, bad: np.ndarray) -> None:
    """Flag (in ``bad``) the rows whose prompt is null or empty, has a null message, a role not in
    :data:`ROLES`, a blank content, or no user message."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bad |= _np(pc.or_kleene(pc.is_null(prompt), pc.equal(pc.list_value_length(prompt), 0)))
    msgs = pc.list_flatten(prompt)
    parent = pc.list_parent_indices(prompt).to_numpy(zero_copy_only=False)
    if len(msgs):
        role = pc.struct_field(msgs, "role")
        msg_bad = pc.or_kleene(pc.or_kleene(pc.is_null(msgs), pc.invert(pc.fill_null(pc.is_in(role, value_set=pa.array(ROLES)), False))),
                               _blank(pc.struct_field(msgs, "content")))
        bad[parent[_np(msg_bad)]] = True
        users = np.bincount(parent[_np(pc.equal(role, "user"))], minlength=len(bad))
    else:
        users = np.zeros(len(bad), dtype=np.int64)
    bad |= users == 0


def _label_masks(col: dict):
    """Masks of the rows whose reward model, provenance or label state breaks the contract (the key
    aside), or whose ``simulation.noise`` is not one of :data:`NOISE_KINDS`, one at a time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rm, ei = col["reward_model"], col[EXTRA_INFO]
    gt = pc.struct_field(rm, "ground_truth")
    labeled = pc.struct_field(ei, "labeled")
    src = pc.struct_field(ei, "label_source")
    unlabeled_src = pc.equal(src, UNLABELED_SOURCE)
    yield pc.is_null(rm)
    yield pc.invert(pc.fill_null(pc.equal(pc.struct_field(rm, "style"), REWARD_STYLE), False))
    yield pc.is_null(gt)
    yield pc.is_null(ei)
    yield _blank(pc.struct_field(ei, "source"))
    yield _blank(pc.struct_field(ei, "split"))
    yield pc.is_null(labeled)
    yield pc.invert(pc.fill_null(pc.is_in(src, value_set=pa.array(LABEL_SOURCES)), False))
    yield pc.and_(labeled, unlabeled_src)
    yield pc.and_(pc.invert(labeled), pc.invert(unlabeled_src))
    yield pc.and_(labeled, _blank(gt))
    yield pc.and_(pc.invert(labeled), pc.not_equal(gt, ""))
    if SIMULATION in col and pa.types.is_struct(col[SIMULATION].type) and "noise" in _fields(col[SIMULATION].type):
        noise = pc.struct_field(col[SIMULATION], "noise")
        if _is_str(noise.type):
            yield pc.and_(pc.is_valid(noise), pc.invert(pc.fill_null(pc.is_in(noise, value_set=pa.array(NOISE_KINDS)), False)))


def _flag_duplicates(index, index_blank: np.ndarray, bad: np.ndarray) -> dict[str, int]:
    """Flag (in ``bad``) every later occurrence of a valid key; returns the first occurrences the row
    checker does not see (unflagged rows), which must still count as seen when it names the later ones."""
    import pyarrow as pa
    import pyarrow.compute as pc

    seen: dict[str, int] = {}
    ok = np.flatnonzero(~index_blank)
    if ok.size:
        codes = pc.dictionary_encode(index.take(pa.array(ok))).indices.to_numpy(zero_copy_only=False)
        uniq, at = np.unique(codes, return_index=True)
        first = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
        first[uniq] = ok[at]  # each key's first valid occurrence
        later = ok[first[codes] != ok]
        if later.size:
            bad[later] = True
            firsts = np.unique(first[codes[np.isin(ok, later)]])
            for pos, key in zip(firsts.tolist(), index.take(pa.array(firsts)).to_pylist()):
                if not bad[pos]:
                    seen[key] = pos
    return seen
