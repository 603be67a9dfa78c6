"""The record contract's one validator: whole columns flag the rows that break a rule, each flagged row
is named.

:func:`find_table_issues` checks a pyarrow Table with the column rules of :mod:`.column_rules` (Arrow
compute over its columns, no Python step per row) and hands the rows they flag (few, or none) to
:class:`_Checker`, which phrases every violation of one row: its position and key, the field, what was expected and what was found
(duplicate keys, wrong types, inconsistent label states, ...). :class:`RecordError` lists them.

Rows in memory (dicts, or a DataFrame) become a table once (:func:`rows_table`, with the explicit
records schema) and are checked by the same column rules. Arrow's conversion to that schema would
coerce what the contract refuses (``3.5`` into an int column is ``3``, bytes into a string column are
text, a str into a list column a list of its characters, a key a struct does not have is dropped), so a
row whose values do not read back from the table as they went in is flagged too, and every flagged
row is named from its own values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .column_rules import covered, flag_rows
from .schema import (
    ABILITY,
    DATA_SOURCE,
    EXTRA_INFO,
    EXTRA_INFO_OPTIONAL,
    EXTRA_INFO_REQUIRED,
    EXTRA_INFO_STANDARD,
    LABEL_SOURCES,
    LABELED_SOURCES,
    MESSAGE_FIELDS,
    METHOD_COLUMNS,
    NOISE_KINDS,
    PROMPT,
    REWARD_MODEL,
    REWARD_MODEL_FIELDS,
    REWARD_STYLE,
    ROLES,
    SIMULATION,
    SIMULATION_FIELDS,
    UNLABELED_SOURCE,
    records_schema,
)

#: how many violations a RecordError message lists before summarising the rest
MAX_SHOWN = 20


@dataclass(frozen=True)
class Issue:
    """One contract violation. ``row`` is the 0-based position, ``key`` the row's index if known."""

    row: int | None
    key: str | None
    field: str
    message: str

    def __str__(self) -> str:
        if self.row is None:
            where = "records"
        elif self.key is not None:
            where = f"row {self.row} (key {self.key!r})"
        else:
            where = f"row {self.row}"
        return f"{where}: {self.field}: {self.message}"


class RecordError(ValueError):
    """Rows (or a file of them) break the record contract.

    ``issues`` holds every violation found (not only the ones shown in the message).
    """

    def __init__(self, issues: Sequence[Issue] | str, *, header: str | None = None, max_shown: int = MAX_SHOWN,
                 hint: str | None = None):
        if isinstance(issues, str):
            self.issues: list[Issue] = []
            super().__init__(issues)
            return
        self.issues = list(issues)
        n = len(self.issues)
        head = header or "records break the contract"
        lines = [f"{head}: {n} error{'s' if n != 1 else ''}"]
        lines += [f"  - {issue}" for issue in self.issues[:max_shown]]
        if n > max_shown:
            lines.append(f"  ... and {n - max_shown} more")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


# ---------------------------------------------------------------------------------------------------
# conversion of pandas / numpy values back to plain python
# ---------------------------------------------------------------------------------------------------
def to_python(value: Any) -> Any:
    """Recursively turn numpy arrays/scalars (as pandas gives for nested Parquet columns) into lists,
    dicts and python scalars. Plain python values pass through unchanged (containers are copied)."""
    if isinstance(value, dict):
        return {k: to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_python(v) for v in value]
    if type(value).__module__ == "numpy":
        if isinstance(value, np.ndarray):
            return [to_python(v) for v in value.tolist()] if value.dtype != object else [to_python(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
    return value


def as_rows(rows: Any) -> list[dict[str, Any]]:
    """Rows as a list of python dicts: accepts a list/tuple of mappings or a pandas DataFrame.

    DataFrame cells are converted with :func:`to_python`; a NaN ``simulation`` cell (a frame built
    by concatenation) becomes None, and an integer ``extra_info`` field that pandas read as float
    (``difficulty``: 3.0 / NaN) is turned back into an int / None. List input is returned as a list of the same objects.
    """
    if isinstance(rows, (list, tuple)):
        return list(rows)
    if type(rows).__module__.startswith("pandas") and hasattr(rows, "to_dict"):
        out = []
        for rec in rows.to_dict("records"):
            row = {str(k): to_python(v) for k, v in rec.items()}
            sim = row.get(SIMULATION)
            if isinstance(sim, float) and math.isnan(sim):
                row[SIMULATION] = None
            extra = row.get(EXTRA_INFO)
            if isinstance(extra, dict):
                # pandas turns a nullable int struct child into float64 (NaN for null): undo that
                for name, t in EXTRA_INFO_OPTIONAL.items():
                    v = extra.get(name)
                    if t is int and isinstance(v, float):
                        if math.isnan(v):
                            extra[name] = None
                        elif v.is_integer():
                            extra[name] = int(v)
            out.append(row)
        return out
    raise TypeError(f"expected a list of row dicts or a pandas DataFrame, got {type(rows).__name__}")


# ---------------------------------------------------------------------------------------------------
# the violations of one row, phrased
# ---------------------------------------------------------------------------------------------------
def _found(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _category(value: Any) -> str | None:
    """Type category for free-form metadata; None when the value is not allowed in a record."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "dict"
    return None


def _compatible(a: str, b: str) -> bool:
    return a == b or {a, b} == {"int", "float"}


def _is_type(value: Any, t: type) -> bool:
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, t)


class _Checker:
    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.seen_index: dict[str, int] = {}
        # free-form metadata: path -> (category, first row)
        self.free_types: dict[str, tuple[str, int]] = {}

    def add(self, row: int, key: str | None, field: str, message: str) -> None:
        self.issues.append(Issue(row, key, field, message))

    def expect(self, i: int, key: str | None, field: str, expected: str, value: Any) -> None:
        self.add(i, key, field, f"expected {expected}, found {_found(value)}")

    def free(self, i: int, key: str | None, path: str, value: Any) -> None:
        if value is None:
            return
        cat = _category(value)
        if cat is None:
            self.expect(i, key, path, "a str, int, float, bool, list or dict", value)
            return
        prev = self.free_types.get(path)
        if prev is None:
            self.free_types[path] = (cat, i)
        elif not _compatible(prev[0], cat):
            self.expect(i, key, path, f"{prev[0]} (as in row {prev[1]}; one type per field across rows)", value)

    def check(self, i: int, row: Any) -> None:
        if not isinstance(row, Mapping):
            self.expect(i, None, "<row>", "a dict", row)
            return
        extra = row.get(EXTRA_INFO)
        idx = extra.get("index") if isinstance(extra, Mapping) else None
        key = idx if isinstance(idx, str) and idx else None

        for col in METHOD_COLUMNS:
            if col not in row:
                self.add(i, key, col, "missing")

        for col in (DATA_SOURCE, ABILITY):
            if col in row and (not isinstance(row[col], str) or not row[col].strip()):
                self.expect(i, key, col, "a non-empty str", row[col])
        if PROMPT in row:
            self._prompt(i, key, row[PROMPT])
        gt = self._reward_model(i, key, row[REWARD_MODEL]) if REWARD_MODEL in row else None
        if EXTRA_INFO in row:
            self._extra_info(i, key, extra, gt)
        if row.get(SIMULATION) is not None:
            self._simulation(i, key, row[SIMULATION])
        for col, v in row.items():
            if col not in METHOD_COLUMNS and col != SIMULATION:
                self.free(i, key, str(col), v)

    def _prompt(self, i: int, key: str | None, prompt: Any) -> None:
        if not isinstance(prompt, (list, tuple)):
            self.expect(i, key, PROMPT, "a list of chat messages", prompt)
            return
        if not prompt:
            self.expect(i, key, PROMPT, "a non-empty list of chat messages", prompt)
            return
        has_user = False
        for j, msg in enumerate(prompt):
            f = f"{PROMPT}[{j}]"
            if not isinstance(msg, Mapping):
                self.expect(i, key, f, "a message dict {role, content}", msg)
                continue
            unknown = sorted(set(msg) - set(MESSAGE_FIELDS))
            if unknown:
                self.add(i, key, f, f"expected only keys {list(MESSAGE_FIELDS)}, found extra {unknown}")
            role = msg.get("role")
            if role not in ROLES:
                self.expect(i, key, f + ".role", f"one of {list(ROLES)}", role)
            content = msg.get("content")
            if not isinstance(content, str) or not content.strip():
                self.expect(i, key, f + ".content", "a non-empty str", content)
            if role == "user":
                has_user = True
        if not has_user:
            self.add(i, key, PROMPT, "expected at least one user message, found none")

    def _reward_model(self, i: int, key: str | None, rm: Any) -> str | None:
        if not isinstance(rm, Mapping):
            self.expect(i, key, REWARD_MODEL, "a dict {style, ground_truth}", rm)
            return None
        unknown = sorted(set(rm) - set(REWARD_MODEL_FIELDS))
        if unknown:
            self.add(i, key, REWARD_MODEL, f"expected only keys {list(REWARD_MODEL_FIELDS)}, found extra {unknown}")
        if "style" not in rm:
            self.add(i, key, REWARD_MODEL + ".style", "missing")
        elif rm["style"] != REWARD_STYLE:
            self.expect(i, key, REWARD_MODEL + ".style", repr(REWARD_STYLE), rm["style"])
        if "ground_truth" not in rm:
            self.add(i, key, REWARD_MODEL + ".ground_truth", "missing (unlabeled rows carry '')")
            return None
        gt = rm["ground_truth"]
        if not isinstance(gt, str):
            self.expect(i, key, REWARD_MODEL + ".ground_truth", "a str ('' when there is no target)", gt)
            return None
        return gt

    def _extra_info(self, i: int, key: str | None, extra: Any, gt: str | None) -> None:
        if not isinstance(extra, Mapping):
            self.expect(i, key, EXTRA_INFO, "a dict", extra)
            return
        ok: dict[str, bool] = {}
        for name, t in EXTRA_INFO_REQUIRED.items():
            f = f"{EXTRA_INFO}.{name}"
            v = extra.get(name)
            ok[name] = name in extra and _is_type(v, t) and not (name in ("index", "source", "split") and not v.strip())
            if name not in extra:
                self.add(i, key, f, "missing")
            elif not ok[name]:
                self.expect(i, key, f, f"a {'non-empty ' if t is str else ''}{t.__name__}", v)
            elif name == "label_source" and v not in LABEL_SOURCES:
                self.expect(i, key, f, f"one of {list(LABEL_SOURCES)}", v)
                ok[name] = False
        for name, t in EXTRA_INFO_OPTIONAL.items():
            v = extra.get(name)
            if v is not None and not _is_type(v, t):
                self.expect(i, key, f"{EXTRA_INFO}.{name}", f"a {t.__name__} or None", v)
        for name, v in extra.items():
            if name not in EXTRA_INFO_STANDARD:
                self.free(i, key, f"{EXTRA_INFO}.{name}", v)

        if ok["index"]:
            idx = extra["index"]
            if idx in self.seen_index:
                self.add(i, key, f"{EXTRA_INFO}.index",
                         f"expected a unique key, found a duplicate of row {self.seen_index[idx]}")
            else:
                self.seen_index[idx] = i
        if ok["labeled"]:
            self._label_state(i, key, extra["labeled"], extra["label_source"] if ok["label_source"] else None, gt)

    def _label_state(self, i: int, key: str | None, labeled: bool, src: str | None, gt: str | None) -> None:
        """labeled <=> label_source != "none"; labeled => a target; unlabeled => no target (``src``,
        ``gt``: None where that field is itself wrong, and named already)."""
        if src is not None and labeled and src == UNLABELED_SOURCE:
            self.add(i, key, f"{EXTRA_INFO}.label_source",
                     f"expected one of {list(LABELED_SOURCES)} for a labeled row, found {src!r}")
        if src is not None and not labeled and src != UNLABELED_SOURCE:
            self.add(i, key, f"{EXTRA_INFO}.label_source",
                     f"expected {UNLABELED_SOURCE!r} for an unlabeled row, found {src!r}")
        if gt is not None and labeled and not gt.strip():
            self.add(i, key, f"{REWARD_MODEL}.ground_truth",
                     f"expected a non-empty target for a labeled row, found {gt!r}")
        if gt is not None and not labeled and gt != "":
            self.add(i, key, f"{REWARD_MODEL}.ground_truth", f"expected '' for an unlabeled row (hidden truth goes in "
                     f"{SIMULATION}.hidden_answer), found {_found(gt)}")

    def _simulation(self, i: int, key: str | None, sim: Any) -> None:
        if not isinstance(sim, Mapping):
            self.expect(i, key, SIMULATION, "a dict or None", sim)
            return
        ha = sim.get("hidden_answer")
        if ha is not None and not isinstance(ha, str):
            self.expect(i, key, f"{SIMULATION}.hidden_answer", "a str or None", ha)
        noise = sim.get("noise")
        if noise is not None and noise not in NOISE_KINDS:
            self.expect(i, key, f"{SIMULATION}.noise", f"one of {list(NOISE_KINDS)} or None", noise)
        for name, v in sim.items():
            if name not in SIMULATION_FIELDS:
                self.free(i, key, f"{SIMULATION}.{name}", v)


# ---------------------------------------------------------------------------------------------------
# rows in memory as a table
# ---------------------------------------------------------------------------------------------------
#: how the issue of a row pyarrow cannot store begins
STORE_REFUSED = "cannot be stored in a records table"
#: up to this many rows (one: make_row), a table's rows are all named by the checker (the column
#: rules would only pick which, at a fixed cost of about 5 ms)
_FEW_ROWS = 1
#: rows read back from a table at a time to compare them with the rows it was built from
_READ_BACK_ROWS = 4096
#: what pyarrow raises for a value it cannot convert to a column's type
_ARROW_ERRORS: tuple[type[BaseException], ...] = (TypeError, ValueError, OverflowError, AttributeError)


def _infer_type(path: str, values: list[Any]):
    """pyarrow type of a free-form metadata field from its non-None values."""
    import pyarrow as pa

    cats = {_category(v) for v in values}
    if not cats or cats == {"str"}:
        return pa.string()
    if cats == {"bool"}:
        return pa.bool_()
    if cats == {"int"}:
        return pa.int64()
    if cats <= {"int", "float"}:
        return pa.float64()
    try:
        return pa.array(values).type
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise RecordError([Issue(None, None, path, f"cannot store these values in one Parquet column: {exc}")]) from exc


def _free_fields(rows: list[Any]) -> dict[tuple[str | None, str], list]:
    """The free-form fields of ``rows`` (``(struct or None, name)``: extra ``extra_info`` and
    ``simulation`` keys, columns beyond the contract's), each as ``[category of its first value, that
    row, the values of a category compatible with it]``: the column's type is inferred from those, and
    a row with another category is named by :class:`_Checker` against that first row."""
    free: dict[tuple[str | None, str], list] = {}

    def see(group: str | None, name: Any, v: Any, i: int) -> None:
        entry = free.setdefault((group, str(name)), [None, None, []])
        cat = None if v is None else _category(v)
        if cat is None:
            return
        if entry[0] is None:
            entry[0], entry[1] = cat, i
        if _compatible(entry[0], cat):
            entry[2].append(to_python(v))

    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            continue
        for k, v in r.items():
            if k not in METHOD_COLUMNS and k != SIMULATION:
                see(None, k, v, i)
        for group, standard in ((EXTRA_INFO, EXTRA_INFO_STANDARD), (SIMULATION, SIMULATION_FIELDS)):
            struct = r.get(group)
            if isinstance(struct, Mapping):
                for k, v in struct.items():
                    if k not in standard:
                        see(group, k, v, i)
    return free


def _path(group: str | None, name: str) -> str:
    return name if group is None else f"{group}.{name}"


def _schema(rows: list[Any]) -> tuple[Any, dict[str, tuple[str, int]]]:
    """The records schema of ``rows`` and each free-form field's first category and row."""
    free = _free_fields(rows)
    types = {g: {n: _infer_type(_path(g, n), e[2]) for (gg, n), e in free.items() if gg == g}
             for g in (EXTRA_INFO, SIMULATION, None)}
    schema = records_schema(types[EXTRA_INFO], types[SIMULATION], types[None])
    return schema, {_path(g, n): (e[0], e[1]) for (g, n), e in free.items() if e[0] is not None}


def _same(a: Any, b: Any) -> bool:
    """Whether ``b``, read back from a table, is ``a`` as it went in: the same types (a tuple reads back
    as a list; a NaN as a NaN) and keys (a key ``a`` lacks reads back as None)."""
    t = type(a)
    if t is str or t is int or t is bool or t is float:  # (the common leaves first: this runs per value)
        return type(b) is t and (a == b or (a != a and b != b))
    if a is None:
        return b is None
    if t is dict or isinstance(a, Mapping):
        if type(b) is not dict:
            return False
        for k, v in a.items():
            if k not in b or not _same(v, b[k]):
                return False
        return len(b) == len(a) or all(v is None for k, v in b.items() if k not in a)
    if t is list or t is tuple:
        if type(b) is not list or len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not _same(x, y):
                return False
        return True
    return t is type(b) and (a == b or (a != a and b != b))


def _refused_rows(rows: list[Any], schema) -> dict[int, str]:
    """The rows pyarrow cannot convert to ``schema`` (found by halving), each with pyarrow's reason."""
    import pyarrow as pa

    refused: dict[int, str] = {}
    todo = [(0, len(rows))]
    while todo:
        lo, hi = todo.pop()
        try:
            pa.Table.from_pylist(rows[lo:hi], schema=schema)
        except (pa.ArrowException, *_ARROW_ERRORS) as exc:
            if hi - lo == 1:
                refused[lo] = str(exc)
            else:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]
    return refused


def _refused_field(row: Any, schema) -> str:
    """The first column of a refused row that pyarrow cannot convert."""
    import pyarrow as pa

    if not isinstance(row, Mapping):
        return "<row>"
    for f in schema:
        try:
            pa.array([row.get(f.name)], f.type)
        except (pa.ArrowException, *_ARROW_ERRORS):
            return f.name
    return "<row>"


def rows_table(rows: Any) -> tuple[Any, list[Issue]]:
    """``(table, issues)``: rows in memory (a list of dicts or a DataFrame) as one records table with
    the explicit schema, and every contract violation in them (the column rules of
    :func:`find_table_issues`; a row that does not read back from the table as it went in, or that
    pyarrow refuses, is flagged too and named from its own values). A row pyarrow refuses stands in the
    table as an empty row that keeps its key; it is always named. Raises :class:`RecordError` where a
    free-form field's values cannot share one Parquet column."""
    import pyarrow as pa

    rows = as_rows(rows)
    schema, free = _schema(rows)
    # (the rows as they are: pyarrow fills a missing key with null, and the read-back check below
    # names whatever it converts)
    try:
        table = pa.Table.from_pylist(rows, schema=schema)
        refused: dict[int, str] = {}
    except (pa.ArrowException, *_ARROW_ERRORS):
        refused = _refused_rows(rows, schema)
        stand_in = list(rows)
        for i in refused:
            extra = rows[i].get(EXTRA_INFO) if isinstance(rows[i], Mapping) else None
            key = extra.get("index") if isinstance(extra, Mapping) else None
            stand_in[i] = {EXTRA_INFO: {"index": key}} if isinstance(key, str) else {}
        table = pa.Table.from_pylist(stand_in, schema=schema)
    flagged = np.zeros(len(rows), dtype=bool)
    for start in range(0, len(rows), _READ_BACK_ROWS):  # (read back a slice at a time: one copy of a slice in memory)
        back = table.slice(start, _READ_BACK_ROWS).to_pylist()
        flagged[start:start + len(back)] = [not _same(r, b) for r, b in zip(rows[start:start + len(back)], back)]
    flagged[list(refused)] = True
    issues = _table_issues(table, flagged, rows, free)
    named = {i.row for i in issues}
    issues += [Issue(i, None, _refused_field(rows[i], schema), f"{STORE_REFUSED}: {reason}")
               for i, reason in refused.items() if i not in named]
    issues.sort(key=lambda issue: issue.row)
    return table, issues


def find_issues(rows: Any) -> list[Issue]:
    """Every contract violation in ``rows`` (a list of dicts or a DataFrame), without raising
    (:func:`rows_table`'s issues)."""
    try:
        return rows_table(rows)[1]
    except RecordError as exc:
        return exc.issues


def validate_rows(rows: Any, *, max_shown: int = MAX_SHOWN) -> None:
    """Check ``rows`` (a list of row dicts or a pandas DataFrame) against the record contract.

    Raises one :class:`RecordError` listing every violation (the first ``max_shown`` in the message,
    all of them in ``.issues``). Returns None when the rows are valid.
    """
    issues = find_issues(rows)
    if issues:
        raise RecordError(issues, max_shown=max_shown)


# ---------------------------------------------------------------------------------------------------
# a table's rows: the column rules flag, the row checker names
# ---------------------------------------------------------------------------------------------------
def find_table_issues(table) -> list[Issue]:
    """Every contract violation in the rows of ``table`` (a pyarrow Table): the column rules flag the
    rows that break one (no Python step per row), and each flagged row is named by :class:`_Checker`
    (its position and key, the field, what was expected and what was found). A table of a layout the
    column rules do not cover (a missing column, an unexpected type) is checked as its rows are
    (:func:`rows_table`)."""
    if not covered(table.schema):
        return find_issues(table.to_pylist())
    return _table_issues(table)


def _table_issues(table, flagged=None, rows: list | None = None, free: dict | None = None) -> list[Issue]:
    """The column rules over ``table`` (a layout :func:`covered` accepts, of more than
    :data:`_FEW_ROWS` rows; else every row is flagged);
    the rows they flag, and those ``flagged`` names, are named by :class:`_Checker` from ``rows`` (the
    values the table was built from; default: the table's own), with the free-form fields' first
    categories ``free``."""
    import pyarrow as pa

    n = table.num_rows
    if n == 0:
        return []
    if covered(table.schema) and n > _FEW_ROWS:
        bad, seen = flag_rows(table, flagged)
    else:  # (few rows: each is named whole, which costs less than the column rules' fixed cost)
        bad, seen = np.ones(n, dtype=bool), {}
    at = np.flatnonzero(bad)
    if not at.size:
        return []
    checker = _Checker()
    checker.seen_index.update(seen)
    checker.free_types.update(free or {})
    named = [rows[i] for i in at.tolist()] if rows is not None else table.take(pa.array(at)).to_pylist()
    for i, row in zip(at.tolist(), named):
        checker.check(i, row)
    return checker.issues
