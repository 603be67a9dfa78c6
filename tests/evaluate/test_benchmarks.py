"""Benchmark preparation from local files with each benchmark's own field names, and letter grading."""

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devenus.evaluate.benchmarks import (
    BENCHMARKS,
    CHOICE_INSTRUCTION,
    MATH_INSTRUCTION,
    PROTOCOLS,
    BenchmarkError,
    find_file,
    prepare,
)
from devenus.verify import grade


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _user_text(item):
    assert len(item.messages) == 1 and item.messages[0]["role"] == "user"
    return item.messages[0]["content"]


def test_paper_protocol_is_the_papers():
    p = PROTOCOLS["paper"]
    ks = {b.name: (b.group, b.k, b.headline) for b in p.benchmarks}
    assert ks == {
        "aime2024": ("ID", 32, "avg@k"), "aime2025": ("ID", 32, "avg@k"), "amc": ("ID", 32, "avg@k"),
        "math500": ("ID", 4, "avg@k"), "minerva": ("ID", 4, "avg@k"), "olympiadbench": ("ID", 4, "avg@k"),
        "arc_challenge": ("OOD", 4, "avg@k"), "gpqa_diamond": ("OOD", 4, "avg@k"), "mmlu_pro": ("OOD", 1, "pass@1"),
    }
    assert (p.temperature, p.top_p, p.max_new_tokens) == (0.6, 1.0, None)  # max length = the training run's
    t = PROTOCOLS["testbed"]  # what runs/testbed.py gives verl's validation
    assert [(b.name, b.k) for b in t.benchmarks] == [("testbed_id", 4), ("testbed_ood", 4)]
    assert (t.temperature, t.top_p, t.max_new_tokens) == (1.0, 1.0, 96)


def test_math_benchmarks_with_their_own_fields(tmp_path):
    aime = _jsonl(tmp_path / "aime2024.jsonl", [
        {"id": 60, "problem": "Find x.", "solution": "long", "answer": "204", "url": "u", "year": 2024}])
    amc = _jsonl(tmp_path / "amc.jsonl", [{"id": 0, "problem": "Compute y.", "answer": 142.0, "url": "u"}])
    m500 = _jsonl(tmp_path / "m.jsonl", [{"problem": "p", "solution": "s", "answer": "\\frac{1}{2}", "subject": "A",
                                          "level": 2, "unique_id": "test/algebra/1.json"}])
    minerva = _jsonl(tmp_path / "minerva.jsonl", [{"question": "Q?", "answer": "3.5"}])
    oly = tmp_path / "oly.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": 1606, "question": "Olympiad?", "final_answer": ["$\\sqrt{2}$"],
                                          "is_multiple_answer": False}]), oly)

    (it,) = prepare(BENCHMARKS["aime2024"], aime)
    assert it.key == "aime2024/60" and it.target == "204"
    assert _user_text(it) == f"Find x.\n{MATH_INSTRUCTION}"
    assert prepare(BENCHMARKS["amc"], amc)[0].target == "142"  # float answers lose their .0
    (m,) = prepare(BENCHMARKS["math500"], m500)
    assert m.key == "math500/test/algebra/1.json" and m.target == "\\frac{1}{2}"
    assert prepare(BENCHMARKS["minerva"], minerva)[0].target == "3.5"
    (o,) = prepare(BENCHMARKS["olympiadbench"], oly)
    assert o.target == "$\\sqrt{2}$" and o.key == "olympiadbench/1606"


def test_arc_relettered_when_labels_are_digits(tmp_path):
    f = _jsonl(tmp_path / "arc.jsonl", [
        {"id": "a1", "question": "Which?", "choices": {"text": ["x", "y", "z", "w"], "label": ["A", "B", "C", "D"]},
         "answerKey": "C"},
        {"id": "a2", "question": "Other?", "choices": {"text": ["p", "q", "r"], "label": ["1", "2", "3"]},
         "answerKey": "2"},
    ])
    a, b = prepare(BENCHMARKS["arc_challenge"], f)
    assert a.target == "C" and "A. x\nB. y\nC. z\nD. w" in _user_text(a)
    assert _user_text(a).endswith(CHOICE_INSTRUCTION)
    assert b.target == "B" and "A. p\nB. q\nC. r" in _user_text(b)


def test_gpqa_shuffled_deterministically_and_target_is_the_correct_option(tmp_path):
    f = tmp_path / "gpqa_diamond.csv"
    cols = ["Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"]
    with open(f, "w", newline="") as fh:
        w = csv.DictWriter(fh, cols)
        w.writeheader()
        for i in range(12):
            w.writerow({"Record ID": f"rec{i}", "Question": f"Q{i}?", "Correct Answer": f"right{i}",
                        "Incorrect Answer 1": f"w1-{i}", "Incorrect Answer 2": f"w2-{i}", "Incorrect Answer 3": f"w3-{i}"})
    items = prepare(BENCHMARKS["gpqa_diamond"], f)
    assert items == prepare(BENCHMARKS["gpqa_diamond"], f)  # the same letters every time
    for i, it in enumerate(items):
        assert f"{it.target}. right{i}\n" in _user_text(it)
    assert len({it.target for it in items}) > 1  # the correct answer does not always sit at A


def test_mmlu_pro_letters_up_to_j(tmp_path):
    f = tmp_path / "mmlu_pro.parquet"
    opts = [f"o{j}" for j in range(10)]
    pq.write_table(pa.Table.from_pylist([{"question_id": 70, "question": "Pick.", "options": opts, "answer": "J",
                                          "answer_index": 9, "category": "law"}]), f)
    (it,) = prepare(BENCHMARKS["mmlu_pro"], f)
    assert it.target == "J" and "J. o9" in _user_text(it) and it.key == "mmlu_pro/70"


def test_errors_name_the_file_row_and_field(tmp_path):
    f = _jsonl(tmp_path / "aime.jsonl", [{"problem": "ok", "answer": "1"}, {"problem": "bad"}])
    with pytest.raises(BenchmarkError, match=r"aime2024: .*aime.jsonl: row 1: field 'answer': expected an answer"):
        prepare(BENCHMARKS["aime2024"], f)
    g = _jsonl(tmp_path / "mmlu.jsonl", [{"question": "q", "options": ["a", "b"], "answer": "C"}])
    with pytest.raises(BenchmarkError, match=r"row 0: field 'answer': expected one letter A-B, found 'C'"):
        prepare(BENCHMARKS["mmlu_pro"], g)
    h = _jsonl(tmp_path / "arc.jsonl", [{"question": "q", "choices": {"text": ["a"], "label": ["A"]}, "answerKey": "E"}])
    with pytest.raises(BenchmarkError, match=r"field 'answerKey'"):
        prepare(BENCHMARKS["arc_challenge"], h)
    d = _jsonl(tmp_path / "dup.jsonl", [{"id": 1, "problem": "a", "answer": "1"}, {"id": 1, "problem": "b", "answer": "2"}])
    with pytest.raises(BenchmarkError, match="repeats row 0"):
        prepare(BENCHMARKS["aime2024"], d)


def test_find_file_says_where_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="HuggingFaceH4/MATH-500"):
        find_file(BENCHMARKS["math500"], tmp_path)
    (tmp_path / "math500.jsonl").write_text("{}\n")
    assert find_file(BENCHMARKS["math500"], tmp_path).name == "math500.jsonl"
    assert find_file(BENCHMARKS["math500"], None, {"math500": str(tmp_path / "math500.jsonl")}).is_file()


def test_limit_keeps_the_first_questions(tmp_path):
    f = _jsonl(tmp_path / "m.jsonl", [{"question": f"q{i}", "answer": str(i)} for i in range(10)])
    assert [it.target for it in prepare(BENCHMARKS["minerva"], f, limit=3)] == ["0", "1", "2"]


def test_multiple_choice_is_graded_by_letter():
    assert grade("so the answer is B.\n\\boxed{B}", "B").score == 1.0
    assert grade("\\boxed{C}", "B").score == 0.0
    assert grade("The answer is D", "D").score == 1.0
    assert grade("\\boxed{(C)}", "C").score == 1.0 and grade("\\boxed{(B)}", "C").score == 0.0


def test_majority_of_letters_in_several_spellings():
    from devenus.evaluate.metrics import majority_correct

    # "(C)", "C" and "c" are one answer: 3 votes against 2 for "B"
    assert majority_correct(["(C)", "B", "B", "C", "c"], [1, 0, 0, 1, 1]) == 1.0


def test_testbed_splits_as_benchmarks(base_testbed):
    items = prepare(BENCHMARKS["testbed_id"], base_testbed.split("test_id"))
    assert len(items) == 256
    it = items[0]
    # the record prompt as verl reads it: the question alone, no instruction added
    assert it.messages[0]["role"] == "user" and it.messages[0]["content"].startswith("Compute ")
    assert it.key.startswith("testbed/test_id/add/") and it.target.isdigit()
    assert len(prepare(BENCHMARKS["testbed_ood"], base_testbed.split("test_ood"))) == 256


def test_benchmarks_are_named_on_the_one_registry():
    assert BENCHMARKS.names()[:3] == ["aime2024", "aime2025", "amc"]  # the order they are listed in
    assert all(BENCHMARKS[n].name == n for n in BENCHMARKS)
    with pytest.raises(KeyError) as e:
        BENCHMARKS["aime24"]
    assert str(e.value).startswith("unknown benchmark 'aime24' (did you mean 'aime2024'?)")
    assert "\n" not in str(e.value)
