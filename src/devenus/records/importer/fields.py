"""Stage 2, map fields: which input column feeds the question, the answer, the id and the metadata
(auto-detected unless named; multiple-choice layouts recognised)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..schema import EXTRA_INFO
from ..validate import RecordError

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
ID_FIELDS: tuple[str, ...] = ("id", "unique_id", "problem_id", "question_id", "idx", "_id", "task_id", "Record ID")
DIFFICULTY_FIELDS: tuple[str, ...] = ("difficulty", "level")
FAMILY_FIELDS: tuple[str, ...] = ("family", "subject", "type", "category")
#: multiple-choice option columns (a list of texts, or ARC's ``{"text": [...], "label": [...]}``)
CHOICE_FIELDS: tuple[str, ...] = ("options", "choices")
#: multiple-choice answer columns: a letter, a 0-based index, an option label or the option text
CHOICE_ANSWER_FIELDS: tuple[str, ...] = ("answerKey", "answer", "answer_index", "label", "Answer")
GPQA_CORRECT = "Correct Answer"
GPQA_INCORRECT: tuple[str, ...] = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def _missing(value: Any) -> bool:
    """None, NaN, a blank str or an empty list."""
    return (value is None or (isinstance(value, float) and math.isnan(value))
            or (isinstance(value, str) and not value.strip()) or (isinstance(value, (list, tuple)) and len(value) == 0))


@dataclass
class ColumnStats:
    """What stage 2 needs to know about the columns, gathered in one pass over the records."""

    columns: dict[str, None] = field(default_factory=dict)  # ordered set
    present: dict[str, int] = field(default_factory=dict)  # non-missing values per column
    non_str: set[str] = field(default_factory=set)  # columns with a non-missing non-str value
    rows: int = 0

    def add(self, rec: Mapping[str, Any]) -> None:
        self.rows += 1
        for k, v in rec.items():
            k = str(k)
            self.columns.setdefault(k, None)
            if not _missing(v):
                self.present[k] = self.present.get(k, 0) + 1
                if not isinstance(v, str):
                    self.non_str.add(k)

    def add_table(self, table: Any) -> bool:
        """:meth:`add` for every row of a pyarrow table, column-wise; False (nothing added) where a
        column's type is one whose Python values could differ from Python's own reading (a
        timestamp pyarrow inferred from a string, say): the caller adds the records then."""
        import pyarrow as pa
        import pyarrow.compute as pc

        counts: dict[str, tuple[int, bool]] = {}
        for name, col in zip(table.column_names, table.columns):
            t = col.type
            if pa.types.is_null(t):
                counts[name] = (0, False)
            elif pa.types.is_string(t) or pa.types.is_large_string(t):
                # (missing = None or whitespace only, as Python's str.strip() sees it: checked in Python
                # for the few values pyarrow's length and space tests do not settle)
                n = len(col) - col.null_count
                if n:
                    blank = pc.or_(pc.equal(pc.binary_length(col), 0), pc.utf8_is_space(col))
                    n -= pc.sum(pc.fill_null(blank, False)).as_py() or 0
                    if n == 0 or not any(v is not None and v.strip() for v in col.slice(0, 64).to_pylist()):
                        n = sum(1 for v in col.to_pylist() if v is not None and v.strip())
                counts[name] = (n, False)
            elif pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_struct(t):
                counts[name] = (len(col) - col.null_count, True)
            elif pa.types.is_floating(t):
                counts[name] = (pc.sum(pc.fill_null(pc.invert(pc.is_nan(col)), False)).as_py() or 0, True)
            elif pa.types.is_list(t) or pa.types.is_large_list(t):
                counts[name] = (pc.sum(pc.fill_null(pc.greater(pc.list_value_length(col), 0), False)).as_py() or 0, True)
            else:
                return False
        self.rows += table.num_rows
        for name, (n, non_str) in counts.items():
            self.columns.setdefault(name, None)
            if n:
                self.present[name] = self.present.get(name, 0) + n
                if non_str:
                    self.non_str.add(name)
        return True

    def has_values(self, name: str) -> bool:
        return self.present.get(name, 0) > 0


@dataclass(frozen=True)
class FieldMap:
    """Which raw column feeds which record field (stage 2's result)."""

    question: str
    answer: str | None
    id: str | None
    difficulty: str | None = None
    family: str | None = None
    #: multiple choice: ``None``, ``"gpqa"`` (correct + incorrect answer columns) or ``"options"``
    choices: str | None = None
    options: str | None = None
    from_verl: bool = False

    def reads(self) -> set[str]:
        """The input columns a record field is made from (the others are not imported)."""
        if self.from_verl:
            return {"prompt", "reward_model", EXTRA_INFO, "data_source", "ability"}
        used = {self.question, self.answer, self.id, self.difficulty, self.family, self.options}
        if self.choices == "gpqa":
            used.update((GPQA_CORRECT, *GPQA_INCORRECT))
        return {c for c in used if c is not None}


def detect_fields(stats: ColumnStats, *, where: str, labeled: bool | str = True,
                  question_field: str | None = None, answer_field: str | None = None,
                  id_field: str | None = None) -> FieldMap:
    """The :class:`FieldMap` for columns seen in ``stats``; a :class:`RecordError` says what is missing."""
    columns = list(stats.columns)

    def named(name: str, what: str) -> str:
        if name not in stats.columns:
            raise RecordError(f"{what} field {name!r} not in {where}; columns found: {columns}")
        return name

    if question_field is not None:
        qf = named(question_field, "question")
    else:
        qf = next((n for n in QUESTION_FIELDS if stats.has_values(n) and n not in stats.non_str), None)
        if qf is None:
            raise RecordError(
                f"no question column detected in {where}: tried {list(QUESTION_FIELDS)} (string values), "
                f"columns found: {columns}; pass question_field= (--question-field)"
            )
    choices, options = None, None
    if GPQA_CORRECT in stats.columns and all(c in stats.columns for c in GPQA_INCORRECT):
        choices = "gpqa"
    else:
        options = next((n for n in CHOICE_FIELDS if stats.has_values(n) and n in stats.non_str and n != qf), None)
        choices = "options" if options else None

    if answer_field is not None:
        af: str | None = named(answer_field, "answer")
        if af == qf:
            raise RecordError(f"answer field and question field are both {qf!r}")
    else:
        candidates = (GPQA_CORRECT,) if choices == "gpqa" else CHOICE_ANSWER_FIELDS if choices else ANSWER_FIELDS
        af = next((n for n in candidates if n != qf and stats.has_values(n)), None)
        if af is None and labeled is True:
            raise RecordError(
                f"no answer column detected in {where} (labeled=True): tried {list(candidates)}, "
                f"columns found: {columns}; pass answer_field= (--answer-field), or import with "
                f"labeled='auto' or labeled=False"
            )
    if id_field:
        idf: str | None = named(id_field, "id")
    elif id_field is None:
        idf = next((n for n in ID_FIELDS if n not in (qf, af) and stats.has_values(n)), None)
    else:  # "": question hashes
        idf = None
    df = next((n for n in DIFFICULTY_FIELDS if stats.has_values(n)), None)
    ff = next((n for n in FAMILY_FIELDS if stats.has_values(n)), None)
    return FieldMap(qf, af, idf, df, ff, choices, options)
