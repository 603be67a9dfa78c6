"""Checking rows against the record contract.

:func:`validate_rows` checks every row, collects every violation (duplicate keys, wrong types,
inconsistent label states, ...) and raises one :class:`RecordError` whose message lists them, each
naming the row (its ``extra_info.index`` when it has one, always its position), the field, what was
expected and what was found.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .schema import (
    ABILITY,
    DATA_SOURCE,
    EXTRA_INFO,
    EXTRA_INFO_OPTIONAL,
    EXTRA_INFO_REQUIRED,
    EXTRA_INFO_STANDARD,
    LABEL_SOURCES,
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
    mod = type(value).__module__
    if mod == "numpy":
        import numpy as np

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
# validation
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


_TYPE_NAMES = {str: "str", bool: "bool", int: "int", float: "float"}


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
        key = None
        if isinstance(extra, Mapping):
            idx = extra.get("index")
            if isinstance(idx, str) and idx:
                key = idx

        for col in METHOD_COLUMNS:
            if col not in row:
                self.add(i, key, col, "missing")

        if DATA_SOURCE in row:
            v = row[DATA_SOURCE]
            if not isinstance(v, str) or not v.strip():
                self.expect(i, key, DATA_SOURCE, "a non-empty str", v)
        if ABILITY in row:
            v = row[ABILITY]
            if not isinstance(v, str) or not v.strip():
                self.expect(i, key, ABILITY, "a non-empty str", v)
        if PROMPT in row:
            self._prompt(i, key, row[PROMPT])
        gt = None
        if REWARD_MODEL in row:
            gt = self._reward_model(i, key, row[REWARD_MODEL])
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
            if name not in extra:
                self.add(i, key, f, "missing")
                ok[name] = False
                continue
            v = extra[name]
            good = _is_type(v, t)
            if name in ("index", "source", "split") and good and not v.strip():
                good = False
            if name == "label_source" and good and v not in LABEL_SOURCES:
                self.expect(i, key, f, f"one of {list(LABEL_SOURCES)}", v)
                ok[name] = False
                continue
            if not good:
                self.expect(i, key, f, f"a {'non-empty ' if t is str else ''}{_TYPE_NAMES[t]}", v)
            ok[name] = good
        for name, t in EXTRA_INFO_OPTIONAL.items():
            v = extra.get(name)
            if v is not None and not _is_type(v, t):
                self.expect(i, key, f"{EXTRA_INFO}.{name}", f"a {_TYPE_NAMES[t]} or None", v)
        for name, v in extra.items():
            if name not in EXTRA_INFO_STANDARD:
                self.free(i, key, f"{EXTRA_INFO}.{name}", v)

        if ok.get("index"):
            idx = extra["index"]
            if idx in self.seen_index:
                self.add(
                    i, key, f"{EXTRA_INFO}.index",
                    f"expected a unique key, found a duplicate of row {self.seen_index[idx]}",
                )
            else:
                self.seen_index[idx] = i

        # label state: labeled <=> label_source != "none"; labeled => target; unlabeled => no target
        if ok.get("labeled") and ok.get("label_source"):
            labeled, src = extra["labeled"], extra["label_source"]
            if labeled and src == UNLABELED_SOURCE:
                self.add(
                    i, key, f"{EXTRA_INFO}.label_source",
                    f"expected one of {[s for s in LABEL_SOURCES if s != UNLABELED_SOURCE]} for a labeled row, "
                    f"found {src!r}",
                )
            if not labeled and src != UNLABELED_SOURCE:
                self.add(
                    i, key, f"{EXTRA_INFO}.label_source",
                    f"expected {UNLABELED_SOURCE!r} for an unlabeled row, found {src!r}",
                )
        if ok.get("labeled") and gt is not None:
            if extra["labeled"] and not gt.strip():
                self.add(
                    i, key, f"{REWARD_MODEL}.ground_truth",
                    f"expected a non-empty target for a labeled row, found {gt!r}",
                )
            if not extra["labeled"] and gt != "":
                self.add(
                    i, key, f"{REWARD_MODEL}.ground_truth",
                    f"expected '' for an unlabeled row (hidden truth goes in {SIMULATION}.hidden_answer), "
                    f"found {_found(gt)}",
                )

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


def find_issues(rows: Any) -> list[Issue]:
    """Every contract violation in ``rows`` (a list of dicts or a DataFrame), without raising."""
    checker = _Checker()
    for i, row in enumerate(as_rows(rows)):
        checker.check(i, row)
    return checker.issues


def validate_rows(rows: Any, *, max_shown: int = MAX_SHOWN) -> None:
    """Check ``rows`` (a list of row dicts or a pandas DataFrame) against the record contract.

    Raises one :class:`RecordError` listing every violation (the first ``max_shown`` in the message,
    all of them in ``.issues``). Returns None when the rows are valid.
    """
    issues = find_issues(rows)
    if issues:
        raise RecordError(issues, max_shown=max_shown)
