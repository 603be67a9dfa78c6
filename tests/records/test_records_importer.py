"""import_raw: formats, column detection, answer reduction, stable keys, label modes, errors."""

from __future__ import annotations

import csv
import json
import sys

import pandas as pd
import pytest

from devenus.records import (
    DEFAULT_PROMPT_TEMPLATE,
    RecordError,
    import_raw,
    import_raw_with_summary,
    question_hash,
    reduce_answer,
    validate_rows,
)

GSM = [
    {"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A farm sells 1000 eggs twice. Total?", "answer": "1000*2=2000\n#### 2,000"},
    {"question": "What is 6 times 7?", "answer": "#### 42"},
]
MATH = [
    {"problem": "Compute $\\frac{1}{2}+\\frac{1}{2}$.", "solution": "We get $\\boxed{1}$.",
     "level": "Level 2", "type": "Algebra", "unique_id": "test/algebra/1.json"},
    {"problem": "Find the set.", "solution": "So the answer is $\\boxed{\\{1, \\frac{2}{3}\\}}$.",
     "level": "Level 5", "type": "Precalculus", "unique_id": "test/precalculus/7.json"},
]


def write_jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def write_csv(path, recs, fields=None):
    fields = fields or list(recs[0])
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in recs:
            w.writerow(r)
    return path


# --- answer reduction ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value, field, expected", [
    ("blah\n#### 72", "answer", "72"),
    ("#### 1,234", "answer", "1234"),
    ("#### 1,2", "answer", "1,2"),  # not a thousands-separated number: left alone
    ("The area is $\\boxed{\\frac{3}{4}}$.", "solution", "\\frac{3}{4}"),
    ("first \\boxed{1} then \\boxed{2}", "solution", "2"),
    ("$\\boxed{\\{1,2\\}}$", "solution", "\\{1,2\\}"),
    ("\\boxed{x^{2}+1}", "answer", "x^{2}+1"),
    ("\\boxed 5", "answer", "5"),
    ("\\fbox{7}", "solution", "7"),
    ("  \\frac{1}{2} ", "answer", "\\frac{1}{2}"),
    (42, "answer", "42"),
    (42.0, "answer", "42"),
    (0.5, "answer", "0.5"),
    (["9"], "answer", "9"),
])
def test_reduce_answer(value, field, expected):
    assert reduce_answer(value, field) == (expected, None)


@pytest.mark.parametrize("value, field, reason", [
    (None, "answer", "empty"),
    ("   ", "answer", "empty"),
    (float("nan"), "answer", "empty"),
    ("no box here, answer 5", "solution", "no \\boxed{}"),
    ("\\boxed{unclosed", "solution", "does not close"),
    ("#### ", "answer", "nothing after"),
    (["1", "2"], "answer", "a list of 2"),
    ({"a": 1}, "answer", "a dict"),
])
def test_reduce_answer_none(value, field, reason):
    ans, why = reduce_answer(value, field)
    assert ans is None and reason in why


def test_boxed_answers_are_extracted_like_the_verifier():
    assert reduce_answer("so \\boxed{a{b}c}", "solution") == ("a{b}c", None)
    assert reduce_answer("first \\boxed{1} then \\boxed{\\frac{1}{2}}", "solution") == ("\\frac{1}{2}", None)


# --- formats ------------------------------------------------------------------------------------------
def test_jsonl_gsm8k(tmp_path):
    rows, summary = import_raw_with_summary(write_jsonl(tmp_path / "gsm.jsonl", GSM), source="gsm8k")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["7", "2000", "42"]
    assert summary.question_field == "question" and summary.answer_field == "answer"
    assert summary.id_field is None and summary.rows == 3 and summary.labeled == 3
    r = rows[0]
    assert r["data_source"] == "gsm8k" and r["ability"] == "math"
    # the default prompt asks for a boxed final answer, which is what the verifier extracts
    assert r["prompt"] == [{"role": "user", "content": DEFAULT_PROMPT_TEMPLATE.replace("{question}", GSM[0]["question"])}]
    ei = r["extra_info"]
    assert ei["index"] == f"gsm8k/{question_hash(GSM[0]['question'])}"
    assert ei["labeled"] is True and ei["label_source"] == "gold"
    assert ei["source"] == "gsm8k" and ei["split"] == "train"
    assert ei["question"] == GSM[0]["question"] and ei["view"] == "original"
    assert r["simulation"] is None
    validate_rows(rows)


def test_json_math_with_ids_and_metadata(tmp_path):
    path = tmp_path / "math.json"
    path.write_text(json.dumps(MATH))
    rows, summary = import_raw_with_summary(path, source="math500", data_source="math", split="test")
    assert summary.question_field == "problem" and summary.answer_field == "solution"
    assert summary.id_field == "unique_id"
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["1", "\\{1, \\frac{2}{3}\\}"]
    assert [r["extra_info"]["index"] for r in rows] == ["math500/test/algebra/1.json", "math500/test/precalculus/7.json"]
    assert rows[0]["data_source"] == "math" and rows[0]["extra_info"]["split"] == "test"
    assert rows[0]["extra_info"]["difficulty"] == 2 and rows[1]["extra_info"]["difficulty"] == 5
    assert rows[0]["extra_info"]["family"] == "Algebra"


def test_json_object_wrapping_a_list(tmp_path):
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"data": GSM}))
    assert len(import_raw(path, source="g")) == 3


def test_csv(tmp_path):
    recs = [{"id": 1, "Problem": "What is 2+2?", "Answer": "4"},
            {"id": 2, "Problem": "What is 3+3?", "Answer": "6"}]
    rows, summary = import_raw_with_summary(write_csv(tmp_path / "d.csv", recs), source="toy")
    assert summary.question_field == "Problem" and summary.answer_field == "Answer"
    assert [r["extra_info"]["index"] for r in rows] == ["toy/1", "toy/2"]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["4", "6"]


def test_tsv(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("query\ttarget\nWhat is 1+1?\t2\n")
    rows = import_raw(path, source="t")
    assert rows[0]["reward_model"]["ground_truth"] == "2"


def test_parquet_input(tmp_path):
    path = tmp_path / "d.parquet"
    pd.DataFrame(MATH).to_parquet(path)
    rows = import_raw(path, source="m")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["1", "\\{1, \\frac{2}{3}\\}"]


def test_rows_and_dataframe_input():
    a = import_raw(GSM, source="g")
    b = import_raw(pd.DataFrame(GSM), source="g")
    assert a == b


def test_numeric_ids_and_answers_from_parquet(tmp_path):
    path = tmp_path / "n.parquet"
    pd.DataFrame({"idx": [3, 4], "question": ["a?", "b?"], "answer": [7, 8.0]}).to_parquet(path)
    rows = import_raw(path, source="n")
    assert [r["extra_info"]["index"] for r in rows] == ["n/3", "n/4"]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["7", "8"]


def test_prompt_column_used_only_when_text(tmp_path):
    recs = [{"prompt": [{"role": "user", "content": "x"}], "query": "What is 5-1?", "answer": "4"}]
    rows, summary = import_raw_with_summary(recs, source="q")
    assert summary.question_field == "query"


def test_system_prompt_template_and_explicit_fields():
    recs = [{"q": "What is 1+1?", "a": "2", "other": "x"}]
    rows = import_raw(recs, source="s", question_field="q", answer_field="a", system_prompt="Be exact.",
                      prompt_template="{question}\nPut the answer in \\boxed{}.", ability="arith")
    r = rows[0]
    assert r["prompt"] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "What is 1+1?\nPut the answer in \\boxed{}."},
    ]
    assert r["ability"] == "arith"
    assert r["extra_info"]["question"] == "What is 1+1?"
    # the key depends on the question only, not on the template
    assert r["extra_info"]["index"] == import_raw(recs, source="s", question_field="q", answer_field="a")[0]["extra_info"]["index"]


# --- keys ---------------------------------------------------------------------------------------------
def test_stable_keys_across_reimport(tmp_path):
    p = write_jsonl(tmp_path / "g.jsonl", GSM)
    k1 = [r["extra_info"]["index"] for r in import_raw(p, source="gsm8k")]
    k2 = [r["extra_info"]["index"] for r in import_raw(p, source="gsm8k")]
    assert k1 == k2 and len(set(k1)) == 3
    # same content as CSV gives the same keys
    k3 = [r["extra_info"]["index"] for r in import_raw(write_csv(tmp_path / "g.csv", GSM), source="gsm8k")]
    assert k3 == k1


def test_hash_keys_independent_of_order_and_whitespace():
    fwd = {r["extra_info"]["question"]: r["extra_info"]["index"] for r in import_raw(GSM, source="g")}
    rev = {r["extra_info"]["question"]: r["extra_info"]["index"] for r in import_raw(GSM[::-1], source="g")}
    assert fwd == rev
    spaced = [{"question": "  Tom has 3   apples and\nbuys 4. How many? ", "answer": "7"}]
    assert import_raw(spaced, source="g")[0]["extra_info"]["index"] == fwd[GSM[0]["question"]]


def test_duplicate_questions_get_deterministic_suffixes():
    recs = [{"question": "Same?", "answer": "1"}, {"question": "Other?", "answer": "2"},
            {"question": "Same?", "answer": "3"}, {"question": "Same? ", "answer": "4"}]
    keys = [r["extra_info"]["index"] for r in import_raw(recs, source="d")]
    h = question_hash("Same?")
    assert keys[0] == f"d/{h}" and keys[2] == f"d/{h}-2" and keys[3] == f"d/{h}-3"
    assert keys == [r["extra_info"]["index"] for r in import_raw(recs, source="d")]
    assert len(set(keys)) == 4


def test_id_field_disabled_uses_hashes():
    recs = [{"id": "a", "question": "Q1?", "answer": "1"}]
    assert import_raw(recs, source="s")[0]["extra_info"]["index"] == "s/a"
    assert import_raw(recs, source="s", id_field="")[0]["extra_info"]["index"] == f"s/{question_hash('Q1?')}"


def test_duplicate_and_missing_ids_are_errors():
    recs = [{"id": 1, "question": "a?", "answer": "1"}, {"id": 1, "question": "b?", "answer": "2"},
            {"id": None, "question": "c?", "answer": "3"}]
    with pytest.raises(RecordError) as ei:
        import_raw(recs, source="s", id_field="id")
    msg = str(ei.value)
    assert "row 1: id: expected a unique id, found '1' again (first in row 0)" in msg
    assert "row 2: id:" in msg


# --- label modes --------------------------------------------------------------------------------------
RAGGED = [{"question": "a?", "answer": "1"}, {"question": "b?", "answer": ""}, {"question": "c?"},
          {"question": "d?", "answer": "4"}]


def test_labeled_true_rows_without_answer_are_errors():
    with pytest.raises(RecordError) as ei:
        import_raw(RAGGED, source="r")
    err = ei.value
    assert [i.row for i in err.issues] == [1, 2]
    assert all(i.key and i.key.startswith("r/") for i in err.issues)
    assert "labeled='auto'" in str(err) and "answer" in str(err)


def test_labeled_auto():
    rows, s = import_raw_with_summary(RAGGED, source="r", labeled="auto")
    assert [r["extra_info"]["labeled"] for r in rows] == [True, False, False, True]
    assert [r["extra_info"]["label_source"] for r in rows] == ["gold", "none", "none", "gold"]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["1", "", "", "4"]
    assert (s.labeled, s.unlabeled, s.hidden_answers) == (2, 2, 0)
    assert all(r["simulation"] is None for r in rows)
    validate_rows(rows)


def test_labeled_false_hides_answers_as_simulation():
    rows, s = import_raw_with_summary(GSM, source="g", labeled=False)
    assert all(r["extra_info"]["labeled"] is False for r in rows)
    assert all(r["reward_model"]["ground_truth"] == "" for r in rows)
    assert [r["simulation"] for r in rows] == [
        {"hidden_answer": "7", "noise": "none"},
        {"hidden_answer": "2000", "noise": "none"},
        {"hidden_answer": "42", "noise": "none"},
    ]
    assert s.hidden_answers == 3
    assert all(r["simulation"] is None for r in import_raw(GSM, source="g", labeled=False, hidden_answers=False))


def test_labeled_false_or_auto_without_answer_column():
    recs = [{"question": "a?"}, {"question": "b?"}]
    assert all(not r["extra_info"]["labeled"] for r in import_raw(recs, source="u", labeled=False))
    assert all(not r["extra_info"]["labeled"] for r in import_raw(recs, source="u", labeled="auto"))


def test_keys_do_not_depend_on_label_mode():
    k_true = [r["extra_info"]["index"] for r in import_raw(GSM, source="g")]
    k_false = [r["extra_info"]["index"] for r in import_raw(GSM, source="g", labeled=False)]
    assert k_true == k_false


# --- errors -------------------------------------------------------------------------------------------
def test_no_question_column_lists_columns():
    with pytest.raises(RecordError) as ei:
        import_raw([{"text": "hi", "label": "1"}], source="x")
    msg = str(ei.value)
    assert "no question column" in msg and "'text'" in msg and "'label'" in msg


def test_no_answer_column_when_labeled():
    with pytest.raises(RecordError, match="no answer column detected.*columns found"):
        import_raw([{"question": "q?", "label": "1"}], source="x")


def test_explicit_fields_missing():
    with pytest.raises(RecordError, match="question field 'nope' not in"):
        import_raw(GSM, source="g", question_field="nope")
    with pytest.raises(RecordError, match="answer field 'nope' not in"):
        import_raw(GSM, source="g", answer_field="nope")
    with pytest.raises(RecordError, match="id field 'nope' not in"):
        import_raw(GSM, source="g", id_field="nope")


def test_empty_question_rows_are_errors():
    recs = [{"question": "ok?", "answer": "1"}, {"question": "", "answer": "2"}, {"question": 5, "answer": "3"}]
    with pytest.raises(RecordError) as ei:
        import_raw(recs, source="x", question_field="question")
    assert [(i.row, i.field) for i in ei.value.issues] == [(1, "question"), (2, "question")]


def test_file_errors(tmp_path):
    with pytest.raises(RecordError, match="unknown input format '.xlsx'"):
        import_raw(tmp_path / "d.xlsx", source="x")
    with pytest.raises(FileNotFoundError):
        import_raw(tmp_path / "missing.jsonl", source="x")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "a?", "answer": "1"}\n{not json\n[1]\n')
    with pytest.raises(RecordError) as ei:
        import_raw(bad, source="x")
    assert "line 2: invalid JSON" in str(ei.value) and "line 3: expected a JSON object" in str(ei.value)
    badjson = tmp_path / "bad.json"
    badjson.write_text('{"question": "a?"}\n{"question": "b?"}\n')
    with pytest.raises(RecordError, match="name the file .jsonl"):
        import_raw(badjson, source="x")
    scalar = tmp_path / "scalar.json"
    scalar.write_text("3")
    with pytest.raises(RecordError, match="expected a JSON list"):
        import_raw(scalar, source="x")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"nope")
    with pytest.raises(RecordError, match="cannot read"):
        import_raw(junk, source="x")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00question\n")
    with pytest.raises(RecordError, match="cannot read"):
        import_raw(binary, source="x")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(RecordError, match="no records"):
        import_raw(empty, source="x")


def test_argument_errors():
    with pytest.raises(ValueError, match="labeled"):
        import_raw(GSM, source="g", labeled="yes")
    with pytest.raises(ValueError, match="source"):
        import_raw(GSM, source="")
    with pytest.raises(ValueError, match="placeholder"):
        import_raw(GSM, source="g", prompt_template="no placeholder")
    with pytest.raises(RecordError, match="expected a dict"):
        import_raw([GSM[0], "x"], source="g")
