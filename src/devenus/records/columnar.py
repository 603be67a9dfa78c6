"""Arrow tables of records, column-wise: the schema a table's rows are written with, a table fitted to a
version's schema, and the manifest's change entries as whole columns of JSON lines.

The version writer takes a table of a million rows without one Python step per row: its schema is
derived from the column types (:func:`table_schema`, the schema :func:`~devenus.records.io.normalize_rows`
infers for the same rows), :func:`conform` re-types it to the version's schema, and
:func:`table_changes` gives :func:`~devenus.records.versions.row_changes` of every row, encoded as
``VersionWriter`` writes them (same JSON text, same order). The contract itself is checked by
:func:`devenus.records.validate.find_table_issues`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .schema import EXTRA_INFO, EXTRA_INFO_STANDARD, METHOD_COLUMNS, PY_WHITESPACE, SIMULATION, SIMULATION_FIELDS, records_schema
from .column_rules import _fields, _flat, _is_str, _np
from .validate import _infer_type

__all__ = ["PY_WHITESPACE", "change_lines", "conform", "json_values", "table_changes", "table_schema"]


# ---------------------------------------------------------------------------------------------------
# the schema normalize_rows would infer
# ---------------------------------------------------------------------------------------------------
def _infer(path: str, arr):
    """The type :func:`devenus.records.validate._infer_type` gives the non-null values of ``arr``."""
    import pyarrow as pa

    if arr.null_count == len(arr):
        return pa.string()
    for is_type, t in ((pa.types.is_boolean, pa.bool_()), (pa.types.is_integer, pa.int64()),
                       (pa.types.is_floating, pa.float64()), (_is_str, pa.string())):
        if is_type(arr.type):
            return t
    return _infer_type(path, arr.drop_null().to_pylist())  # lists and structs: rare, inferred from the values


def table_schema(table):
    """The records schema :func:`~devenus.records.io.normalize_rows` infers for ``table.to_pylist()``
    (for a table whose layout :func:`covered` accepts)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def extras(name: str, standard) -> dict:
        if name not in table.column_names or not pa.types.is_struct(table.schema.field(name).type):
            return {}
        c = table.column(name)
        if c.null_count == len(c):
            return {}  # no row has the struct, so none of its keys is seen
        return {f.name: _infer(f"{name}.{f.name}", pc.struct_field(c, f.name)) for f in table.schema.field(name).type
                if f.name not in standard}

    cols = {n: _infer(n, table.column(n)) for n in table.column_names if n not in METHOD_COLUMNS and n != SIMULATION}
    return records_schema(extras(EXTRA_INFO, EXTRA_INFO_STANDARD), extras(SIMULATION, SIMULATION_FIELDS), cols)


def _conform_array(c, t):
    """One column as type ``t`` with the values it has, or None where that is not a plain re-typing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if c.type == t:
        return c
    if c.null_count == len(c):
        return pa.nulls(len(c), t)
    if pa.types.is_struct(t) and pa.types.is_struct(c.type):
        have = _fields(c.type)
        if set(have) - {f.name for f in t}:
            return None
        children = []
        for f in t:
            # struct_field: a null parent reads as null children, as from_pylist builds them
            ch = _conform_array(pc.struct_field(c, f.name), f.type) if f.name in have else pa.nulls(len(c), f.type)
            if ch is None:
                return None
            children.append(ch)
        return pa.StructArray.from_arrays(children, fields=list(t), mask=c.is_null() if c.null_count else None)
    if (pa.types.is_integer(c.type) and t == pa.int64()) or (_is_str(c.type) and _is_str(t)) \
            or (pa.types.is_floating(c.type) and t == pa.float64()):
        return c.cast(t)
    return None


def conform(table, schema):
    """``table`` with the columns, struct fields and types of ``schema`` (missing fields null), or None
    where that would be more than a re-typing (the writer then takes its row path)."""
    import pyarrow as pa

    if set(table.column_names) - set(schema.names):
        return None
    cols = []
    for f in schema:
        if f.name in table.column_names:
            c = table.column(f.name).combine_chunks()
            c = _conform_array(c, f.type)
            if c is None:
                return None
        else:
            c = pa.nulls(table.num_rows, f.type)
        cols.append(c)
    return pa.Table.from_arrays(cols, schema=schema)


# ---------------------------------------------------------------------------------------------------
# change entries as JSON lines
# ---------------------------------------------------------------------------------------------------
def _canonical(obj: Any) -> Any:
    """JSON-safe, deterministic form of a config value (tuples -> lists, paths -> str, keys sorted)."""
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return repr(obj)


def _dumps(obj: Any) -> str:
    try:  # the common case (str, numbers, bools, lists): no canonicalising walk needed
        return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(_canonical(obj), sort_keys=True, ensure_ascii=False, allow_nan=False)


def json_values(arr):
    """Each value of ``arr`` as ``json.dumps(value, ensure_ascii=False)`` writes it (a string array):
    strings, bools and integers column-wise; other types value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = _flat(arr)
    t = arr.type
    if pa.types.is_null(t):
        return pa.array(["null"] * len(arr), pa.string())
    if pa.types.is_boolean(t):
        s = pc.if_else(arr, "true", "false")
    elif pa.types.is_integer(t):
        s = pc.cast(arr, pa.string())
    elif _is_str(t):
        s = pc.cast(arr, pa.string())
        for ch, esc in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"),
                        ("\f", "\\f")):  # (the backslash first: the others add backslashes)
            s = pc.replace_substring(s, ch, esc)
        s = pc.binary_join_element_wise('"', s, '"', "")
        other = _np(pc.match_substring_regex(s, "[\\x00-\\x1f]"))
        if other.any():  # the remaining control characters (\\u00XX): rare, exactly as json writes them
            idx = np.flatnonzero(other)
            out = np.asarray(s.to_pylist(), dtype=object)
            out[idx] = [json.dumps(v, ensure_ascii=False) for v in arr.take(pa.array(idx)).to_pylist()]
            s = pa.array(out.tolist(), pa.string())
    else:
        return pa.array([_dumps(v) for v in arr.to_pylist()], pa.string())
    return pc.fill_null(s, "null")


def change_lines(key, field: str, before, after, why):
    """The manifest lines of changes (one per element): ``{"after": ..., "before": ..., "field": ...,
    "key": ..., "why": ...}`` as ``VersionWriter.add_changes`` writes them. ``why`` is a string or a
    string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    w = pa.scalar(json.dumps(why, ensure_ascii=False)) if isinstance(why, str) else json_values(why)
    return pc.binary_join_element_wise('{"after": ', json_values(after), ', "before": ', json_values(before),
                                       ', "field": ', pa.scalar(json.dumps(field, ensure_ascii=False)),
                                       ', "key": ', json_values(key), ', "why": ', w, "}", "")


def _leaf_columns(table) -> dict[str, Any]:
    """``row_changes``' leaves as columns: top-level columns, and the fields of the structs it opens
    (a null struct's fields read as null, as a missing dict's do)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    for name in table.column_names:
        c = table.column(name)
        if name in (EXTRA_INFO, SIMULATION, "reward_model") and pa.types.is_struct(c.type):
            for f in c.type:
                out[f"{name}.{f.name}"] = pc.struct_field(c, f.name)
        elif name == SIMULATION and pa.types.is_null(c.type):
            continue  # a null simulation compares as empty
        else:
            out[name] = c
    return out


def _differs(a, b) -> np.ndarray:
    """``a[i] != b[i]`` as Python compares the values (None == None; NaN != NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(a)
    if a is b:
        return np.zeros(n, dtype=bool)
    if a.type == b.type and not pa.types.is_floating(a.type) and a.equals(b):
        return np.zeros(n, dtype=bool)
    simple = (a.type == b.type and (pa.types.is_boolean(a.type) or pa.types.is_integer(a.type)
                                    or _is_str(a.type) or pa.types.is_floating(a.type)))
    if simple:
        eq = pc.equal(a, b)  # null where either is null
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        same = pc.or_kleene(pc.fill_null(eq, False), both_null)
        return ~_np(same)
    return np.asarray([x != y for x, y in zip(a.to_pylist(), b.to_pylist())], dtype=bool)


def table_changes(before, after, why, keys=None):
    """The change entries ``row_changes(before[i], after[i], why[i])`` for every row of two aligned
    tables, row by row and by sorted field path within a row, as a table ``row`` (position),
    ``key``, ``field``, ``line`` (the manifest JSON line).

    ``keys``: the key column (default: ``after``'s ``extra_info.index``); ``why``: a string or a
    string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if before.num_rows != after.num_rows:
        raise ValueError(f"before has {before.num_rows} rows, after {after.num_rows}")
    a, b = _leaf_columns(before), _leaf_columns(after)
    if keys is None:
        keys = pc.struct_field(after.column(EXTRA_INFO), "index")
    keys = pc.cast(keys, pa.string())
    nulls = pa.nulls(before.num_rows, pa.string())
    parts = []
    for rank, path in enumerate(sorted(set(a) | set(b))):
        va, vb = _flat(a.get(path, nulls)), _flat(b.get(path, nulls))
        if va.type != vb.type and (pa.types.is_null(va.type) or va.null_count == len(va)):
            va = pa.nulls(len(va), vb.type)
        elif va.type != vb.type and (pa.types.is_null(vb.type) or vb.null_count == len(vb)):
            vb = pa.nulls(len(vb), va.type)
        diff = np.flatnonzero(_differs(va, vb))
        if not diff.size:
            continue
        idx = pa.array(diff)
        w = why if isinstance(why, str) else why.take(idx)
        parts.append(pa.table({"row": pa.array(diff, pa.int64()), "rank": pa.array(np.full(diff.size, rank, np.int64)),
                               "key": keys.take(idx), "field": pa.array(np.full(diff.size, path, dtype=object), pa.string()),
                               "line": change_lines(keys.take(idx), path, va.take(idx), vb.take(idx), w)}))
    if not parts:
        return pa.table({"row": pa.array([], pa.int64()), "key": pa.array([], pa.string()),
                         "field": pa.array([], pa.string()), "line": pa.array([], pa.string())})
    t = pa.concat_tables(parts)
    order = np.lexsort((t.column("rank").to_numpy(), t.column("row").to_numpy()))
    return t.take(pa.array(order)).drop_columns(["rank"])
