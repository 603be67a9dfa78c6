"""Importing raw question/answer data (JSONL, JSON, CSV/TSV, Parquet, rows in memory, verl Parquet).

The import runs in stages, each in a module of its own:

1. **read** (:mod:`.read`, one reader per format: :mod:`.read_jsonl`, :mod:`.read_json`,
   :mod:`.read_csv`, Parquet in :mod:`.read`): the records in :class:`~.chunks.Chunk` s, each a
   pyarrow table where pyarrow reads the block exactly (JSONL in 4 MB blocks by ``pyarrow.json``,
   plain CSV/TSV by ``pyarrow.csv``, Parquet batches) and Python's reading of it
   (:class:`~.chunks.Raw` records with their location, ``line 7`` / ``row 7``) otherwise or on
   demand. ``.json`` is one document and is loaded whole. Malformed input is reported by line:
   invalid JSON, a non-UTF-8 byte, an integer too long to convert, JSON nested too deeply, an
   unterminated quote or a ragged CSV row.
2. **map fields** (:mod:`.fields`: :class:`~.fields.ColumnStats` -> :func:`~.fields.detect_fields`):
   the question, answer, id and metadata columns, auto-detected (:data:`~.fields.QUESTION_FIELDS`, ...) unless
   named, from the first chunk and checked against the whole input's columns at the end (a second
   pass if they differ); multiple-choice layouts (GPQA, ARC, MMLU / MMLU-Pro) are recognised;
   ``from_verl`` reads verl's own layout (``prompt[-1].content``, ``reward_model.ground_truth``,
   ``extra_info.index``).
3. **normalise** (:mod:`.normalise`): the final target (``#### 42``, the last ``\\boxed{}``),
   numbers as canonical decimal strings (``1e-07`` -> ``0.0000001``), keys. A target no answer can
   ever match (a bool, a non-finite number, unbalanced braces, longer than the verifier extracts) is
   *refused*: the row is left out and listed with its field and reason. Lengths are checked before any
   pattern runs, and the patterns are linear.
4. **build rows** (:mod:`.columns`): the values of a whole chunk pyarrow read, column-wise, or,
   where a chunk holds an error, a refusal or multiple choice, each record's values by :mod:`.build`
   (the same values); one records table built from them (:func:`~.columns.records_table`). Label
   modes and per-row errors; every bad row at once. verl's layout is built record by record.
   ``dedupe="exact"`` (:class:`~.normalise.Deduper`) leaves out exact repeats of a prompt and its target.
5. **write** (:mod:`.pipeline`: :func:`import_file`): one dataset version through
   :mod:`devenus.records.versions` (Parquet + manifest whose parent is the raw input's hash);
   :func:`import_raw` returns the rows instead.

Keys (``extra_info.index``): ``f"{source}/{id}"`` when an id column exists, else
``f"{source}/{sha1(normalised question)[:16]}"``; repeated questions get ``-2``, ``-3``, ... in file
order. Label modes: ``labeled=True`` (every row needs an answer), ``"auto"`` (labeled iff it has one),
``False`` (all unlabeled; answers kept as ``simulation.hidden_answer`` unless ``hidden_answers=False``).
"""

from ..prompts import DEFAULT_CHOICE_TEMPLATE, DEFAULT_PROMPT_TEMPLATE
from .build import ImportOptions
from .normalise import normalise_target, question_hash, reduce_answer
from .pipeline import ImportSummary, import_file, import_raw, import_raw_with_summary
from .read import read_raw

__all__ = [
    "DEFAULT_CHOICE_TEMPLATE",
    "DEFAULT_PROMPT_TEMPLATE",
    "ImportOptions",
    "ImportSummary",
    "import_file",
    "import_raw",
    "import_raw_with_summary",
    "normalise_target",
    "question_hash",
    "read_raw",
    "reduce_answer",
]
