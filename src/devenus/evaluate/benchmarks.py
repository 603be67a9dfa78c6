"""Benchmarks and protocols: which questions, how many samples, how they are prompted and graded.

A benchmark is prepared from a local file (JSONL, JSON, CSV or Parquet, read by
:func:`devenus.records.importer.read_raw`) with that benchmark's own field names; nothing is downloaded
at run time (``docs/evaluate.md`` says where to get each file). Multiple-choice benchmarks show the
options as ``A. ...`` lines and are graded by letter: the target is a single letter and the verifier
compares the model's extracted answer with it.

Three protocols ship:

- ``records``: no benchmark of its own: the record-contract files given with ``devenus eval --records``,
  each under its own name, prompts unchanged, T=1, top-p 1, avg@4, 512 new tokens (pass the training
  run's max response length to match it).
- ``paper``: the field's protocol as the DE-Venus report uses it. ID: AIME 2024, AIME 2025, AMC
  (avg@32), MATH-500, Minerva, OlympiadBench (avg@4); OOD: ARC-Challenge, GPQA-Diamond (avg@4),
  MMLU-Pro (pass@1). Temperature 0.6, top-p 1.0, at most the training run's max response length.
- ``testbed``: the CPU testbed's held-out splits as verl's validation runs them in
  ``runs/testbed.py``: the record prompts unchanged, T=1, top-p 1, avg@4, 96 new tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from devenus.registry import Registry

__all__ = [
    "Benchmark",
    "BenchmarkError",
    "Item",
    "Protocol",
    "PROTOCOLS",
    "BENCHMARKS",
    "LETTERS",
    "MATH_INSTRUCTION",
    "CHOICE_INSTRUCTION",
    "prepare",
    "find_file",
]

LETTERS = "ABCDEFGHIJ"
# The instruction appended to every math question (Qwen's math prompt, as RLVR papers evaluate with it).
MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CHOICE_INSTRUCTION = (
    "Please reason step by step, and put the letter of the correct option (only the letter) within \\boxed{}."
)


class BenchmarkError(ValueError):
    """A benchmark file that cannot be prepared: names the file, the row, the field and what was expected."""


@dataclass(frozen=True)
class Item:
    """One prepared question: its chat messages, its target (a letter for multiple choice), a stable key."""

    key: str
    messages: tuple[dict, ...]
    target: str


@dataclass(frozen=True)
class Benchmark:
    name: str
    group: str  # "ID" or "OOD": which average it joins
    k: int  # samples per question
    headline: str  # the metric the protocol reports: "avg@k" or "pass@1"
    kind: str  # "math", "choice" or "records" (record-contract Parquet, prompts used as they are)
    files: tuple[str, ...] = ()  # names looked for in --data-dir, first found wins
    fields: str = ""  # the fields read, for the doc and the error messages
    source: str = ""  # where to get the file
    prepare_rows: Callable[[list[dict], str, str], list[Item]] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Protocol:
    name: str
    benchmarks: tuple[Benchmark, ...]
    temperature: float
    top_p: float
    max_new_tokens: int | None  # None: the training run's max response length must be given
    description: str = ""

    def benchmark(self, name: str) -> Benchmark:
        for b in self.benchmarks:
            if b.name == name:
                return b
        raise KeyError(f"benchmark {name!r} is not in protocol {self.name!r}; it has: "
                       f"{', '.join(b.name for b in self.benchmarks)}")


# ----------------------------------------------------------------------------------------- helpers
def _err(bench: str, path: str, row: int, fld: str, expected: str, found: Any) -> BenchmarkError:
    shown = repr(found)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return BenchmarkError(f"{bench}: {path}: row {row}: field {fld!r}: expected {expected}, found {shown}")


def _text(bench: str, path: str, i: int, row: dict, fld: str) -> str:
    v = row.get(fld)
    if not isinstance(v, str) or not v.strip():
        if fld not in row:
            raise _err(bench, path, i, fld, f"a non-empty string (the row has fields {sorted(row)[:12]})", None)
        raise _err(bench, path, i, fld, "a non-empty string", v)
    return v.strip()


def _answer(bench: str, path: str, i: int, row: dict, fld: str) -> str:
    from devenus.records.importer import reduce_answer

    if fld not in row:
        raise _err(bench, path, i, fld, f"an answer (the row has fields {sorted(row)[:12]})", None)
    ans, why = reduce_answer(row[fld], fld)
    if ans is None:
        raise _err(bench, path, i, fld, f"one final answer ({why})", row[fld])
    return ans


def _key(bench: str, row: dict, i: int, id_field: str | None) -> str:
    v = row.get(id_field) if id_field else None
    return f"{bench}/{v}" if v is not None and str(v).strip() else f"{bench}/{i:05d}"


def _user(text: str) -> tuple[dict, ...]:
    return ({"role": "user", "content": text},)


def math_item(key: str, question: str, target: str) -> Item:
    return Item(key, _user(f"{question}\n{MATH_INSTRUCTION}"), target)


def choice_item(key: str, question: str, options: Sequence[str], answer_index: int) -> Item:
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(f"{key}: {len(options)} options (expected 2-{len(LETTERS)})")
    lines = "\n".join(f"{LETTERS[j]}. {str(o).strip()}" for j, o in enumerate(options))
    return Item(key, _user(f"{question}\n\n{lines}\n\n{CHOICE_INSTRUCTION}"), LETTERS[answer_index])


def _math(question_field: str, answer_field: str, id_field: str | None):
    def prep(rows: list[dict], path: str, bench: str) -> list[Item]:
        return [math_item(_key(bench, r, i, id_field), _text(bench, path, i, r, question_field),
                          _answer(bench, path, i, r, answer_field)) for i, r in enumerate(rows)]

    return prep


def _arc(rows: list[dict], path: str, bench: str) -> list[Item]:
    """allenai/ai2_arc: ``question``, ``choices`` {``text``: [...], ``label``: [...]}, ``answerKey``.
    Some rows label options 1-4 instead of A-D: options are relettered by position."""
    out = []
    for i, r in enumerate(rows):
        q = _text(bench, path, i, r, "question")
        ch = r.get("choices")
        if not isinstance(ch, dict) or not isinstance(ch.get("text"), list) or not isinstance(ch.get("label"), list) \
                or len(ch["text"]) != len(ch["label"]):
            raise _err(bench, path, i, "choices", "{'text': [...], 'label': [...]} of equal length", ch)
        labels = [str(x).strip() for x in ch["label"]]
        key = str(r.get("answerKey", "")).strip()
        if key not in labels:
            raise _err(bench, path, i, "answerKey", f"one of the choice labels {labels}", r.get("answerKey"))
        out.append(choice_item(_key(bench, r, i, "id"), q, ch["text"], labels.index(key)))
    return out


def _gpqa(rows: list[dict], path: str, bench: str) -> list[Item]:
    """Idavidrein/gpqa (gpqa_diamond.csv): ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``.
    The file keeps the correct answer first, so the four options are shuffled with a seed drawn from the
    question's ``Record ID`` (the same letters on every run and every machine)."""
    out = []
    fields = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
    for i, r in enumerate(rows):
        q = _text(bench, path, i, r, "Question")
        opts = [_text(bench, path, i, r, f) for f in fields]
        key = _key(bench, r, i, "Record ID")
        order = list(range(4))
        random.Random(f"gpqa:{key}").shuffle(order)
        out.append(choice_item(key, q, [opts[j] for j in order], order.index(0)))
    return out


def _mmlu_pro(rows: list[dict], path: str, bench: str) -> list[Item]:
    """TIGER-Lab/MMLU-Pro (test split): ``question``, ``options`` (up to 10), ``answer`` (a letter)."""
    out = []
    for i, r in enumerate(rows):
        q = _text(bench, path, i, r, "question")
        opts = r.get("options")
        if hasattr(opts, "tolist"):
            opts = opts.tolist()
        if isinstance(opts, str):  # CSV exports keep the list as its Python repr
            import ast

            try:
                opts = ast.literal_eval(opts)
            except (ValueError, SyntaxError):
                pass
        if not isinstance(opts, list) or not 2 <= len(opts) <= len(LETTERS):
            raise _err(bench, path, i, "options", f"a list of 2-{len(LETTERS)} options", opts)
        ans = str(r.get("answer", "")).strip()
        if len(ans) != 1 or ans not in LETTERS[: len(opts)]:
            raise _err(bench, path, i, "answer", f"one letter A-{LETTERS[len(opts) - 1]}", r.get("answer"))
        out.append(choice_item(_key(bench, r, i, "question_id"), q, opts, LETTERS.index(ans)))
    return out


def _records(rows: list[dict], path: str, bench: str) -> list[Item]:
    """Record-contract rows (what verl's RLHFDataset reads): ``prompt`` messages as they are,
    ``reward_model.ground_truth`` as the target, ``extra_info.index`` as the key."""
    out = []
    for i, r in enumerate(rows):
        prompt = r.get("prompt")
        if not isinstance(prompt, list) or not prompt:
            raise _err(bench, path, i, "prompt", "a non-empty list of chat messages", prompt)
        gt = (r.get("reward_model") or {}).get("ground_truth")
        if not isinstance(gt, str) or not gt.strip():
            raise _err(bench, path, i, "reward_model.ground_truth", "a target (an evaluation needs labels)", gt)
        idx = (r.get("extra_info") or {}).get("index")
        out.append(Item(str(idx) if idx is not None else f"{bench}/{i:05d}",
                        tuple({"role": m["role"], "content": m["content"]} for m in prompt), gt))
    return out


# ---------------------------------------------------------------------------------------------- registry
_HF = "https://huggingface.co/datasets/"
#: benchmark name -> its :class:`Benchmark`, on the one registry helper (an unknown name: one line with a
#: did-you-mean); listed in the order below
BENCHMARKS: Registry[Benchmark] = Registry("benchmark", ordered=True)
for _bench in (
    Benchmark("aime2024", "ID", 32, "avg@k", "math", ("aime2024.jsonl", "aime_2024.jsonl", "aime2024.parquet"),
              "problem, answer, id", _HF + "HuggingFaceH4/aime_2024 (train split, 30 problems)",
              _math("problem", "answer", "id")),
    Benchmark("aime2025", "ID", 32, "avg@k", "math", ("aime2025.jsonl", "aime_2025.jsonl", "aime2025.parquet"),
              "problem, answer, id", _HF + "math-ai/aime25 (test split, 30 problems)",
              _math("problem", "answer", "id")),
    Benchmark("amc", "ID", 32, "avg@k", "math", ("amc.jsonl", "amc.parquet"),
              "problem, answer, id", _HF + "AI-MO/aimo-validation-amc (train split, 83 problems)",
              _math("problem", "answer", "id")),
    Benchmark("math500", "ID", 4, "avg@k", "math", ("math500.jsonl", "math500.parquet", "test.jsonl"),
              "problem, answer, unique_id", _HF + "HuggingFaceH4/MATH-500 (test split, 500 problems)",
              _math("problem", "answer", "unique_id")),
    Benchmark("minerva", "ID", 4, "avg@k", "math", ("minerva.jsonl", "minerva.parquet"),
              "question, answer", _HF + "math-ai/minervamath (test split, 272 problems)",
              _math("question", "answer", None)),
    Benchmark("olympiadbench", "ID", 4, "avg@k", "math", ("olympiadbench.jsonl", "olympiadbench.parquet"),
              "question, final_answer (a one-element list), id",
              _HF + "Hothan/OlympiadBench, config OE_TO_maths_en_COMP (train split, 675 problems)",
              _math("question", "final_answer", "id")),
    Benchmark("arc_challenge", "OOD", 4, "avg@k", "choice", ("arc_challenge.jsonl", "arc_challenge.parquet"),
              "question, choices.text, choices.label, answerKey, id",
              _HF + "allenai/ai2_arc, config ARC-Challenge (test split, 1172 questions)", _arc),
    Benchmark("gpqa_diamond", "OOD", 4, "avg@k", "choice", ("gpqa_diamond.csv", "gpqa_diamond.jsonl"),
              "Question, Correct Answer, Incorrect Answer 1-3, Record ID",
              _HF + "Idavidrein/gpqa, file gpqa_diamond.csv (gated: accept the terms; 198 questions)", _gpqa),
    Benchmark("mmlu_pro", "OOD", 1, "pass@1", "choice", ("mmlu_pro.parquet", "mmlu_pro.jsonl"),
              "question, options, answer, question_id",
              _HF + "TIGER-Lab/MMLU-Pro (test split, 12032 questions)", _mmlu_pro),
    Benchmark("testbed_id", "ID", 4, "avg@k", "records", fields="record contract",
              source="the testbed's test_id split (built by `devenus testbed build`)", prepare_rows=_records),
    Benchmark("testbed_ood", "OOD", 4, "avg@k", "records", fields="record contract",
              source="the testbed's test_ood split (built by `devenus testbed build`)", prepare_rows=_records),
):
    BENCHMARKS.register(_bench.name, _bench)
del _bench

PROTOCOLS: dict[str, Protocol] = {
    "records": Protocol(
        "records", (), temperature=1.0, top_p=1.0, max_new_tokens=512,
        description="your own record files (--records), prompts as they are (T=1, avg@4)",
    ),
    "paper": Protocol(
        "paper",
        tuple(BENCHMARKS[n] for n in ("aime2024", "aime2025", "amc", "math500", "minerva", "olympiadbench",
                                      "arc_challenge", "gpqa_diamond", "mmlu_pro")),
        temperature=0.6, top_p=1.0, max_new_tokens=None,
        description="the DE-Venus report's protocol (T=0.6, top-p 1.0, training max length)",
    ),
    "testbed": Protocol(
        "testbed", (BENCHMARKS["testbed_id"], BENCHMARKS["testbed_ood"]),
        temperature=1.0, top_p=1.0, max_new_tokens=96,
        description="the CPU testbed's held-out splits as verl's validation runs them (T=1, avg@4)",
    ),
}


def record_benchmark(name: str, group: str, k: int) -> Benchmark:
    """Any record-contract Parquet file as a benchmark (prompts used as they are)."""
    if group not in ("ID", "OOD"):
        raise ValueError(f"benchmark {name!r}: group must be ID or OOD, got {group!r}")
    return Benchmark(name, group, k, "avg@k", "records", fields="record contract", prepare_rows=_records)


def find_file(bench: Benchmark, data_dir: str | Path | None, files: dict[str, str] | None = None) -> Path:
    """The benchmark's file: an explicit ``files[name]``, else the first of its names found in ``data_dir``."""
    if files and bench.name in files:
        p = Path(files[bench.name])
        if not p.is_file():
            raise FileNotFoundError(f"{bench.name}: file not found: {p}")
        return p
    if data_dir is not None:
        for f in bench.files:
            p = Path(data_dir) / f
            if p.is_file():
                return p
    where = f"none of {list(bench.files)} in {data_dir}" if data_dir else "no --data-dir given"
    raise FileNotFoundError(f"{bench.name}: no file ({where}); pass --file {bench.name}=PATH. "
                            f"Get it from {bench.source or 'its source'} (fields: {bench.fields}).")


def prepare(bench: Benchmark, path: str | Path, limit: int | None = None) -> list[Item]:
    """Read ``path`` and prepare its questions (the first ``limit`` only, if given)."""
    from devenus.records.importer import read_raw

    try:
        rows = read_raw(path)
    except ValueError as e:  # RecordError: unreadable file, bad JSON line, unknown extension
        raise BenchmarkError(f"{bench.name}: {e}") from e
    if not rows:
        raise BenchmarkError(f"{bench.name}: {path}: no rows")
    if limit is not None:
        rows = rows[:limit]
    assert bench.prepare_rows is not None
    try:
        items = bench.prepare_rows(rows, str(path), bench.name)
    except BenchmarkError:
        raise
    except ValueError as e:
        raise BenchmarkError(f"{bench.name}: {path}: {e}") from e
    seen: dict[str, int] = {}
    for i, it in enumerate(items):
        if it.key in seen:
            raise BenchmarkError(f"{bench.name}: {path}: row {i}: key {it.key!r} repeats row {seen[it.key]}")
        seen[it.key] = i
    return items
