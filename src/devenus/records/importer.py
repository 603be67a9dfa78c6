"""Importing raw question/answer data (JSONL, JSON, CSV/TSV, Parquet, or rows in memory) as records.

* The question column is auto-detected (:data:`QUESTION_FIELDS`, first match whose values are
  strings) unless ``question_field`` is given; likewise the answer column (:data:`ANSWER_FIELDS`).
* Answers are reduced to a final target: GSM8K-style ``"... #### 42"`` -> ``"42"``; a MATH-style
  ``solution`` (or any answer holding ``\\boxed{...}``) -> the content of its last box.
* Keys (``extra_info.index``): ``f"{source}/{id}"`` when an id column exists (``id_field`` or one of
  :data:`ID_FIELDS`), else ``f"{source}/{sha1(normalised question)[:16]}"``; the second, third, ...
  copy of an identical question gets ``-2``, ``-3``, ... in file order. Re-importing the same input
  gives the same keys; hash keys of distinct questions do not depend on row order.
* ``labeled=True``: every row needs an answer (rows without one are errors). ``labeled="auto"``:
  labeled iff an answer exists. ``labeled=False``: every row is unlabeled (``ground_truth=""``); an
  answer that exists is kept as simulation truth (``simulation.hidden_answer``) unless
  ``hidden_answers=False``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .rows import make_row
from .schema import EXTRA_INFO
from .validate import Issue, RecordError, as_rows, to_python, validate_rows

#: question column names tried in order (a column is used only if its values are strings)
QUESTION_FIELDS: tuple[str, ...] = (
    "question", "problem", "prompt", "query", "input", "Problem", "Question", "instruction",
)
#: answer column names tried in order (first one with at least one non-empty value)
ANSWER_FIELDS: tuple[str, ...] = (
    "answer", "final_answer", "expected_answer", "ground_truth", "target", "Answer", "solution",
    "output",
)
#: long-form answer columns: the final answer must be extracted (\boxed{} or ####) or there is none
SOLUTION_FIELDS: frozenset[str] = frozenset({"solution"})
#: id column names tried in order when ``id_field`` is None
ID_FIELDS: tuple[str, ...] = ("id", "unique_id", "problem_id", "question_id", "idx", "_id", "task_id")
DIFFICULTY_FIELDS: tuple[str, ...] = ("difficulty", "level")
FAMILY_FIELDS: tuple[str, ...] = ("family", "subject", "type", "category")

RAW_FORMATS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
}
_JSON_LIST_KEYS = ("data", "rows", "examples", "instances", "records", "items")


# ---------------------------------------------------------------------------------------------------
# reading raw files
# ---------------------------------------------------------------------------------------------------
def read_raw(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a raw data file into a list of dicts, choosing the reader by extension."""
    path = Path(path)
    fmt = RAW_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(
            f"unknown input format {path.suffix or '(no extension)'!r} for {path}: "
            f"expected one of {sorted(RAW_FORMATS)}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    try:
        if fmt == "jsonl":
            return _read_jsonl(path)
        if fmt == "json":
            return _read_json(path)
        if fmt in ("csv", "tsv"):
            return _read_csv(path, "\t" if fmt == "tsv" else ",")
        return _read_parquet(path)
    except RecordError:
        raise
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise RecordError(f"cannot read {path} as {fmt}: {exc}") from exc


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows, issues = [], []
    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                issues.append(Issue(None, None, f"line {lineno}", f"invalid JSON: {exc.msg} (column {exc.colno})"))
                continue
            if not isinstance(obj, dict):
                issues.append(Issue(None, None, f"line {lineno}", f"expected a JSON object, found {type(obj).__name__}"))
                continue
            rows.append(obj)
    if issues:
        raise RecordError(issues, header=f"cannot read {path} as JSONL")
    return rows


def _read_json(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8-sig") as f:
        try:
            obj = json.load(f)
        except json.JSONDecodeError as exc:
            hint = " (one JSON object per line? name the file .jsonl)" if "Extra data" in exc.msg else ""
            raise RecordError(f"cannot read {path} as JSON: {exc}{hint}") from exc
    if isinstance(obj, dict):
        for k in _JSON_LIST_KEYS:
            if isinstance(obj.get(k), list):
                obj = obj[k]
                break
        else:
            raise RecordError(
                f"cannot read {path}: expected a JSON list of objects (or an object with one of "
                f"{list(_JSON_LIST_KEYS)} holding one), found an object with keys {sorted(obj)[:10]}"
            )
    if not isinstance(obj, list):
        raise RecordError(f"cannot read {path}: expected a JSON list of objects, found {type(obj).__name__}")
    bad = [Issue(i, None, "<record>", f"expected a JSON object, found {type(r).__name__}")
           for i, r in enumerate(obj) if not isinstance(r, dict)]
    if bad:
        raise RecordError(bad, header=f"cannot read {path}")
    return obj


def _read_csv(path: Path, delimiter: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        if reader.fieldnames is None:
            return []
        return [{k: v for k, v in r.items() if k is not None} for r in reader]


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except pa.ArrowException as exc:
        raise RecordError(f"cannot read {path} as parquet: {exc}") from exc
    keep = [n for n in table.column_names if not n.startswith("__index_level_")]
    return [to_python(r) for r in table.select(keep).to_pylist()]


# ---------------------------------------------------------------------------------------------------
# answers
# ---------------------------------------------------------------------------------------------------
def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str) and not value.strip():
        return True
    if isinstance(value, (list, tuple)) and len(value) == 0:
        return True
    return False


def _boxed_answer(text: str) -> str | None:
    """The boxed final answer, extracted exactly as the verifier extracts it (targets match predictions)."""
    from devenus.verify.extract import extract_answer

    got = extract_answer(text)
    return got.strip() if isinstance(got, str) and got.strip() else None


_NUMBER_WITH_COMMAS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$")


def reduce_answer(value: Any, field: str | None = None) -> tuple[str | None, str | None]:
    """The final target in a raw answer value, and why there is none.

    Returns ``(answer, None)`` or ``(None, reason)``. ``"... #### 1,234"`` -> ``"1234"``; text with a
    ``\\boxed{}`` -> the last box's content; a ``solution`` field without a box has no answer;
    integral numbers lose a trailing ``.0``; a one-element list gives its element.
    """
    if _missing(value):
        return None, "empty"
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return reduce_answer(value[0], field)
        return None, f"a list of {len(value)} answers (expected one)"
    if isinstance(value, Mapping):
        return None, "a dict (expected a str or a number)"
    if isinstance(value, bool):
        return str(value), None
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, float):
        return (str(int(value)) if value.is_integer() else repr(value)), None
    if not isinstance(value, str):
        return None, f"a {type(value).__name__} (expected a str or a number)"
    s = value.strip()
    if "####" in s:
        tail = s.rsplit("####", 1)[1].strip()
        if _NUMBER_WITH_COMMAS.match(tail):
            tail = tail.replace(",", "")
        return (tail, None) if tail else (None, "nothing after '####'")
    if "\\boxed" in s or "\\fbox" in s:
        boxed = _boxed_answer(s)
        if boxed:
            return boxed, None
        if field in SOLUTION_FIELDS:
            return None, "its \\boxed{} does not close or is empty"
    if field in SOLUTION_FIELDS:
        return None, "no \\boxed{} final answer (or '####') in the solution"
    return s, None


# ---------------------------------------------------------------------------------------------------
# keys and metadata
# ---------------------------------------------------------------------------------------------------
def normalize_question(text: str) -> str:
    """Text used for hash keys: NFKC, whitespace runs collapsed to one space, ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def question_hash(text: str) -> str:
    """``sha1(normalize_question(text))[:16]``."""
    return hashlib.sha1(normalize_question(text).encode("utf-8")).hexdigest()[:16]


def _id_str(value: Any) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value).strip()
    return None


def _difficulty(value: Any) -> int | None:
    if _missing(value) or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(?:level\s*)?([-+]?\d+)\s*", value, flags=re.IGNORECASE)
        return int(m.group(1)) if m else None
    return None


# ---------------------------------------------------------------------------------------------------
# import
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportSummary:
    """What :func:`import_raw_with_summary` detected and produced."""

    input: str
    rows: int
    labeled: int
    unlabeled: int
    hidden_answers: int
    question_field: str
    answer_field: str | None
    id_field: str | None

    def describe(self) -> str:
        keys = f"id field {self.id_field!r}" if self.id_field else "question hash"
        return (
            f"{self.rows} rows from {self.input}: {self.labeled} labeled, {self.unlabeled} unlabeled"
            f" ({self.hidden_answers} with a hidden answer); question field {self.question_field!r},"
            f" answer field {self.answer_field!r}, keys from {keys}"
        )


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            seen.setdefault(str(k), None)
    return list(seen)


def _detect_question(rows, columns) -> str | None:
    for name in QUESTION_FIELDS:
        if name not in columns:
            continue
        vals = [r.get(name) for r in rows if not _missing(r.get(name))]
        if vals and all(isinstance(v, str) for v in vals):
            return name
    return None


def _detect_first_present(rows, columns, candidates) -> str | None:
    for name in candidates:
        if name in columns and any(not _missing(r.get(name)) for r in rows):
            return name
    return None


def import_raw_with_summary(
    path_or_rows: Any,
    *,
    source: str,
    data_source: str | None = None,
    split: str = "train",
    labeled: bool | str = True,
    question_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    ability: str = "math",
    system_prompt: str | None = None,
    prompt_template: str | None = None,
    hidden_answers: bool = True,
) -> tuple[list[dict[str, Any]], ImportSummary]:
    """:func:`import_raw`, also returning an :class:`ImportSummary` of what was detected."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"source must be a non-empty str, got {source!r}")
    if labeled not in (True, False, "auto"):
        raise ValueError(f"labeled must be True, False or 'auto', got {labeled!r}")
    if prompt_template is not None and "{question}" not in prompt_template:
        raise ValueError("prompt_template must contain the placeholder '{question}'")
    data_source = data_source or source

    if isinstance(path_or_rows, (str, os.PathLike)):
        where = str(path_or_rows)
        raw = read_raw(path_or_rows)
    else:
        where = "<rows>"
        raw = [to_python(r) for r in as_rows(path_or_rows)]
        bad = [Issue(i, None, "<record>", f"expected a dict, found {type(r).__name__}")
               for i, r in enumerate(raw) if not isinstance(r, Mapping)]
        if bad:
            raise RecordError(bad, header="cannot import rows")
    if not raw:
        raise RecordError(f"no records in {where}")
    columns = _columns(raw)

    # --- columns
    if question_field is not None:
        if question_field not in columns:
            raise RecordError(f"question field {question_field!r} not in {where}; columns found: {columns}")
        qf = question_field
    else:
        qf = _detect_question(raw, columns)
        if qf is None:
            raise RecordError(
                f"no question column detected in {where}: tried {list(QUESTION_FIELDS)} (string values), "
                f"columns found: {columns}; pass question_field= (--question-field)"
            )
    if answer_field is not None:
        if answer_field not in columns:
            raise RecordError(f"answer field {answer_field!r} not in {where}; columns found: {columns}")
        if answer_field == qf:
            raise RecordError(f"answer field and question field are both {qf!r}")
        af: str | None = answer_field
    else:
        af = _detect_first_present(raw, [c for c in columns if c != qf], ANSWER_FIELDS)
        if af is None and labeled is True:
            raise RecordError(
                f"no answer column detected in {where} (labeled=True): tried {list(ANSWER_FIELDS)}, "
                f"columns found: {columns}; pass answer_field= (--answer-field), or import with "
                f"labeled='auto' or labeled=False"
            )
    if id_field:
        if id_field not in columns:
            raise RecordError(f"id field {id_field!r} not in {where}; columns found: {columns}")
        idf: str | None = id_field
    elif id_field is None:
        idf = _detect_first_present(raw, [c for c in columns if c not in (qf, af)], ID_FIELDS)
    else:  # "" : use question hashes
        idf = None
    df = _detect_first_present(raw, columns, DIFFICULTY_FIELDS)
    ff = _detect_first_present(raw, columns, FAMILY_FIELDS)

    # --- rows
    issues: list[Issue] = []
    seen_ids: dict[str, int] = {}
    hash_counts: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    n_hidden = 0
    for i, rec in enumerate(raw):
        q = rec.get(qf)
        if _missing(q) or not isinstance(q, str):
            issues.append(Issue(i, None, qf, f"expected a non-empty question str, found {type(q).__name__} {q!r:.60}"))
            continue
        question = q.strip()

        if idf is not None:
            raw_id = _id_str(rec.get(idf))
            if raw_id is None:
                issues.append(Issue(i, None, idf, f"expected an id (str or int), found {rec.get(idf)!r:.60}"))
                continue
            if raw_id in seen_ids:
                issues.append(Issue(i, None, idf, f"expected a unique id, found {raw_id!r} again (first in row {seen_ids[raw_id]})"))
                continue
            seen_ids[raw_id] = i
            key = f"{source}/{raw_id}"
        else:
            h = question_hash(question)
            n = hash_counts.get(h, 0) + 1
            hash_counts[h] = n
            key = f"{source}/{h}" if n == 1 else f"{source}/{h}-{n}"

        answer, why = (None, "no answer column") if af is None else reduce_answer(rec.get(af), af)
        sim = None
        if answer is not None and labeled is not False:
            is_labeled, target = True, answer
        elif answer is None and labeled is True:
            issues.append(Issue(i, key, af or "<answer>", f"no answer ({why}) but labeled=True; use labeled='auto' to import such rows as unlabeled"))
            continue
        else:
            is_labeled, target = False, ""
            if answer is not None and hidden_answers:
                sim = {"hidden_answer": answer, "noise": "none"}
                n_hidden += 1

        content = question if prompt_template is None else prompt_template.replace("{question}", question)
        fam = rec.get(ff) if ff else None
        extra = {
            "difficulty": _difficulty(rec.get(df)) if df else None,
            "family": fam.strip() if isinstance(fam, str) and fam.strip() else None,
            "view": "original",
            "pair_key": None,
            "question": question,
        }
        rows.append(
            make_row(
                data_source=data_source,
                index=key,
                source=source,
                question=content,
                ground_truth=target,
                labeled=is_labeled,
                split=split,
                ability=ability,
                system_prompt=system_prompt,
                extra=extra,
                simulation=sim,
                validate=False,
            )
        )
    if issues:
        raise RecordError(issues, header=f"cannot import {where}")
    validate_rows(rows)
    n_labeled = sum(1 for r in rows if r[EXTRA_INFO]["labeled"])
    summary = ImportSummary(
        input=where,
        rows=len(rows),
        labeled=n_labeled,
        unlabeled=len(rows) - n_labeled,
        hidden_answers=n_hidden,
        question_field=qf,
        answer_field=af,
        id_field=idf,
    )
    return rows, summary


def import_raw(
    path_or_rows: Any,
    *,
    source: str,
    data_source: str | None = None,
    split: str = "train",
    labeled: bool | str = True,
    question_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    ability: str = "math",
    system_prompt: str | None = None,
    prompt_template: str | None = None,
    hidden_answers: bool = True,
) -> list[dict[str, Any]]:
    """Convert raw question/answer data into validated records (see the module docstring).

    ``path_or_rows``: a ``.jsonl``/``.ndjson``, ``.json``, ``.csv``/``.tsv`` or ``.parquet`` path, a
    list of dicts or a DataFrame. ``source`` names the provenance and prefixes every key;
    ``data_source`` defaults to ``source``. ``id_field=""`` forces question-hash keys even when an id
    column exists. ``prompt_template`` (with a ``{question}`` placeholder) wraps the question in the
    user message; ``extra_info.question`` keeps the raw text and keys never depend on the template.
    Raises :class:`RecordError` listing every bad row, or for an unreadable file, an unknown
    extension or an undetectable question column (the message lists the columns found).
    """
    rows, _ = import_raw_with_summary(
        path_or_rows,
        source=source,
        data_source=data_source,
        split=split,
        labeled=labeled,
        question_field=question_field,
        answer_field=answer_field,
        id_field=id_field,
        ability=ability,
        system_prompt=system_prompt,
        prompt_template=prompt_template,
        hidden_answers=hidden_answers,
    )
    return rows
