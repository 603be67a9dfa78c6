"""Import defects of issue 9 (items 4, 5, 8, 9): targets, strict CSV, error locations, verl layout,
multiple choice, the default prompt."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from devenus.records import (
    DEFAULT_CHOICE_TEMPLATE,
    DEFAULT_PROMPT_TEMPLATE,
    RecordError,
    import_file,
    import_raw,
    import_raw_with_summary,
    read_records,
)
from devenus.records.versions import read_manifest, verify_manifest


def jsonl(path, lines):
    path.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
    return path


# --- item 4: targets an answer can match --------------------------------------------------------------
def test_numbers_become_canonical_decimals(tmp_path):
    p = jsonl(tmp_path / "n.jsonl", [
        '{"question": "a?", "answer": 1e-07}',
        '{"question": "b?", "answer": 1e400}',
        '{"question": "c?", "answer": 0.1}',
        '{"question": "d?", "answer": 42.0}',
        '{"question": "e?", "answer": "2.5E3"}',
        '{"question": "f?", "answer": 123456789012345678901234567890}',
    ])
    got = [r["reward_model"]["ground_truth"] for r in import_raw(p, source="n")]
    assert got == ["0.0000001", "1" + "0" * 400, "0.1", "42", "2500", "123456789012345678901234567890"]
    assert [r["reward_model"]["ground_truth"] for r in import_raw([{"question": "x?", "answer": 1e-07}], source="n")] == ["0.0000001"]


def test_unmatchable_targets_are_refused_by_row_and_field_and_listed(tmp_path):
    p = jsonl(tmp_path / "bad.jsonl", [
        '{"question": "ok?", "answer": "7"}',
        '{"question": "bool?", "answer": true}',
        '{"question": "inf?", "answer": Infinity}',
        '{"question": "box?", "answer": "\\\\boxed{5"}',
        '{"question": "frac?", "answer": "\\\\frac{1}{2"}',
        '{"question": "nan?", "answer": "NaN"}',
    ])
    rows, s = import_raw_with_summary(p, source="b")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["7"]
    assert [(r.where, r.field) for r in s.refusals] == [("line 2", "answer"), ("line 3", "answer"), ("line 4", "answer"),
                                                      ("line 5", "answer"), ("line 6", "answer")]
    reasons = [r.why for r in s.refusals]
    assert "a bool" in reasons[0] and "non-finite" in reasons[1] and "non-finite" in reasons[4]
    assert "unbalanced braces" in reasons[3] and ("does not close" in reasons[2] or "unbalanced" in reasons[2])
    assert "refused 5 row(s)" in s.describe() and "line 2 (key 'b/" in s.describe()
    # the version lists the same refusals
    summary, m = import_file(p, tmp_path / "out.parquet", source="b", progress=False)
    assert [(r.where, r.field) for r in m.refusals] == [(r.where, r.field) for r in s.refusals]
    assert m.counts["refused"] == 5 and m.parents[0].rows == 6


def test_all_rows_refused_is_an_error():
    with pytest.raises(RecordError, match="all 1 were refused"):
        import_raw([{"question": "q?", "answer": True}], source="x")


# --- item 5: strict CSV -------------------------------------------------------------------------------
def test_csv_unterminated_quote_is_refused_with_its_line(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text('question,answer\nWhat is 1+1?,2\n"What is 2+2?,4\nWhat is 3+3?,6\nWhat is 4+4?,8\n')
    with pytest.raises(RecordError, match=r"line 3: a quoted field opened here never closes"):
        import_raw(p, source="c")


def test_csv_ragged_rows_are_refused_with_their_lines(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("question,answer\nWhat is 1+1?,2\nWhat is 2+2?,4,extra\nWhat is 3+3?\nWhat is 4+4?,8\n")
    with pytest.raises(RecordError) as ei:
        import_raw(p, source="c")
    msg = str(ei.value)
    assert "line 3: expected 2 fields (as in the header), found 3" in msg
    assert "line 4: expected 2 fields (as in the header), found 1" in msg


def test_csv_quoted_newlines_are_still_fine(tmp_path):
    p = tmp_path / "ok.csv"
    p.write_text('question,answer\n"Line one\nline two?",2\nWhat is 3+3?,6\n')
    rows = import_raw(p, source="c")
    assert [r["extra_info"]["question"] for r in rows] == ["Line one\nline two?", "What is 3+3?"]


# --- item 8: error locations --------------------------------------------------------------------------
def test_non_utf8_byte_is_reported_by_line(tmp_path):
    p = tmp_path / "b.jsonl"
    body = "".join(json.dumps({"question": f"What is {i}?", "answer": str(i)}) + "\n" for i in range(5000))
    p.write_bytes(body.encode() + b'{"question": "caf\xe9?", "answer": "1"}\n')
    with pytest.raises(RecordError, match=r"line 5001: not UTF-8: byte 0xe9 at column 18"):
        import_raw(p, source="b")
    c = tmp_path / "b.csv"
    c.write_bytes(b"question,answer\nok?,1\ncaf\xe9?,2\n")
    with pytest.raises(RecordError, match=r"line 3: not UTF-8: byte 0xe9 at column 4"):
        import_raw(c, source="b")
    j = tmp_path / "b.json"
    j.write_bytes(b'[\n{"question": "ok?", "answer": "1"},\n{"question": "caf\xe9?", "answer": "1"}\n]')
    with pytest.raises(RecordError, match=r"line 3: not UTF-8: byte 0xe9 at column 18"):
        import_raw(j, source="b")


def test_giant_integer_is_reported_by_line(tmp_path):
    p = jsonl(tmp_path / "g.jsonl", ['{"question": "a?", "answer": "1"}',
                                     '{"question": "b?", "answer": ' + "9" * 5000 + "}"])
    with pytest.raises(RecordError, match=r"line 2: an integer too long to read"):
        import_raw(p, source="g")
    j = tmp_path / "g.json"
    j.write_text('[\n{"question": "a?", "answer": ' + "9" * 5000 + "}\n]")
    with pytest.raises(RecordError, match=r"line 2: an integer too long to read"):
        import_raw(j, source="g")
    # many digit runs just under the limit before the long one: found in one scan (tried at every
    # digit, these 200 runs took about 30 s)
    runs = tmp_path / "runs.json"
    runs.write_text("[\n" + "".join('{"question": "q%d %s", "answer": "1"},\n' % (i, "1" * 4300) for i in range(200))
                    + '{"question": "z?", "answer": ' + "9" * 5000 + "}\n]")
    t0 = time.perf_counter()
    with pytest.raises(RecordError, match=r"line 202: an integer too long to read"):
        import_raw(runs, source="g")
    assert time.perf_counter() - t0 < 10
    big = jsonl(tmp_path / "d.jsonl", ['{"question": "a?", "answer": "1", "difficulty": ' + "9" * 30 + "}"])
    with pytest.raises(RecordError, match=r"row 0 .*difficulty.*64 bits.*\(line 1\)"):
        import_raw(big, source="g")


def test_a_directory_as_input_is_a_directory(tmp_path):
    d = tmp_path / "data.jsonl"
    d.mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory"):
        import_raw(d, source="x")


# --- item 9: verl's own layout, multiple choice, the default prompt -----------------------------------
def verl_gsm8k(path):
    pd.DataFrame({
        "data_source": ["openai/gsm8k"] * 2,
        "prompt": [[{"role": "user", "content": "Natalia sold 48 clips... Let's think step by step and output the final answer after \"####\"."}],
                   [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weng earns $12 an hour..."}]],
        "ability": ["math"] * 2,
        "reward_model": [{"style": "rule", "ground_truth": "72"}, {"style": "rule", "ground_truth": "10"}],
        "extra_info": [{"split": "train", "index": 0, "answer": "48/2 = 24 ... #### 72", "question": "Natalia sold 48 clips..."},
                       {"split": "train", "index": 1, "answer": "... #### 10", "question": "Weng earns $12 an hour..."}],
    }).to_parquet(path)
    return path


def test_verl_gsm8k_parquet_imports_with_from_verl(tmp_path):
    src = verl_gsm8k(tmp_path / "gsm8k_train.parquet")
    with pytest.raises(RecordError, match=r"devenus import .*gsm8k_train.parquet --from-verl --out"):
        read_records(src)
    summary, m = import_file(src, tmp_path / "d0.parquet", source="gsm8k", from_verl=True, progress=False)
    rows = read_records(tmp_path / "d0.parquet")
    assert [r["extra_info"]["index"] for r in rows] == ["gsm8k/0", "gsm8k/1"]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["72", "10"]
    assert all(r["extra_info"]["labeled"] and r["extra_info"]["label_source"] == "gold" for r in rows)
    assert rows[1]["prompt"][0] == {"role": "system", "content": "Be brief."}  # the prompt as verl had it
    assert rows[0]["data_source"] == "openai/gsm8k" and rows[0]["extra_info"]["answer"].endswith("#### 72")
    assert rows[0]["extra_info"]["question"] == "Natalia sold 48 clips..."
    assert m.rule == "import" and m.config["from_verl"] is True
    verify_manifest(tmp_path / "d0.parquet", parents=[src])


def test_verl_dapo_layout_with_string_index_and_other_style(tmp_path):
    src = tmp_path / "dapo.parquet"
    pd.DataFrame({
        "data_source": ["math_dapo"], "ability": ["MATH"],
        "prompt": [[{"role": "user", "content": "Solve... The last line of your response should be of the form Answer: $Answer"}]],
        "reward_model": [{"ground_truth": "34", "style": "rule-lighteval/MATH_v2"}],
        "extra_info": [{"index": "9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"}],
    }).to_parquet(src)
    rows, s = import_raw_with_summary(src, source="dapo", from_verl=True, labeled="auto")
    r = rows[0]
    assert r["extra_info"]["index"] == "dapo/9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"
    assert r["reward_model"] == {"style": "rule", "ground_truth": "34"}
    assert r["extra_info"]["verl_reward_style"] == "rule-lighteval/MATH_v2" and r["ability"] == "MATH"
    with pytest.raises(ValueError, match="used as it is"):
        import_raw(src, source="dapo", from_verl=True, prompt_template="{question}")


def test_default_prompt_asks_for_a_boxed_answer_and_is_configurable():
    rec = [{"question": "What is 2+2?", "answer": "4"}]
    assert import_raw(rec, source="p")[0]["prompt"][-1]["content"] == DEFAULT_PROMPT_TEMPLATE.replace("{question}", "What is 2+2?")
    assert "\\boxed{}" in DEFAULT_PROMPT_TEMPLATE
    assert import_raw(rec, source="p", prompt_template="{question}")[0]["prompt"][-1]["content"] == "What is 2+2?"


def test_gpqa_options_in_the_prompt_letter_as_target():
    recs = [{"Question": f"Which particle {i}?", "Correct Answer": "photon", "Incorrect Answer 1": "gluon",
             "Incorrect Answer 2": "muon", "Incorrect Answer 3": "pion", "Record ID": f"rec{i}"} for i in range(8)]
    rows, s = import_raw_with_summary(recs, source="gpqa")
    assert s.choices == "gpqa" and s.id_field == "Record ID"
    letters = set()
    for r in rows:
        content = r["prompt"][-1]["content"]
        target = r["reward_model"]["ground_truth"]
        assert f"{target}. photon" in content and content.endswith(DEFAULT_CHOICE_TEMPLATE.split("{question}")[1])
        assert sorted(r["extra_info"]["choices"]) == ["gluon", "muon", "photon", "pion"]
        letters.add(target)
    assert len(letters) > 1  # the correct option is not always in the same place
    assert rows == import_raw(recs, source="gpqa")  # ... but the shuffle is fixed


def test_arc_and_mmlu_pro_and_mmlu_layouts():
    arc = [{"id": "Mercury_1", "question": "Which is a gas?",
            "choices": {"text": ["iron", "oxygen", "salt", "wood"], "label": ["A", "B", "C", "D"]}, "answerKey": "B"},
           {"id": "Mercury_2", "question": "Pick the mammal.",
            "choices": {"text": ["shark", "trout", "whale"], "label": ["1", "2", "3"]}, "answerKey": "3"}]
    rows = import_raw(arc, source="arc")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["B", "C"]
    assert "A. iron\nB. oxygen\nC. salt\nD. wood" in rows[0]["prompt"][-1]["content"]
    pro = [{"question_id": 70, "question": "Typical advertising regulatory bodies suggest...",
            "options": ["safe practices", "fear", "jealousy", "trivial"], "answer": "D", "answer_index": 3,
            "category": "business"}]
    r = import_raw(pro, source="mmlu_pro")[0]
    assert r["reward_model"]["ground_truth"] == "D" and r["extra_info"]["family"] == "business"
    assert "D. trivial" in r["prompt"][-1]["content"]
    mmlu = [{"question": "2+2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1}]
    assert import_raw(mmlu, source="mmlu")[0]["reward_model"]["ground_truth"] == "B"
    bad = [{"question": "2+2?", "choices": ["3", "4"], "answer": "Z"}]
    with pytest.raises(RecordError, match="none of the 2 options"):
        import_raw(bad, source="mmlu")


def test_verl_parquet_streams_with_one_schema_across_batches(tmp_path):
    """Keys null in the first batch and typed later, and a standard key of another type, keep one
    schema over every batch (decided from the file's schema)."""
    n = 9000  # > 2 batches of 4096
    src = tmp_path / "big.parquet"
    pd.DataFrame({
        "data_source": ["d"] * n, "ability": ["math"] * n,
        "prompt": [[{"role": "user", "content": f"q{i}?"}] for i in range(n)],
        "reward_model": [{"style": "rule", "ground_truth": str(i)} for i in range(n)],
        "extra_info": [{"index": i, "late": (None if i < 5000 else i), "difficulty": 2.5} for i in range(n)],
    }).to_parquet(src)
    summary, m = import_file(src, tmp_path / "o.parquet", source="b", from_verl=True, progress=False)
    rows = read_records(tmp_path / "o.parquet")
    assert len(rows) == n and rows[8999]["extra_info"]["late"] == 8999 and rows[0]["extra_info"]["late"] is None
    assert rows[0]["extra_info"]["verl_difficulty"] == 2.5 and rows[0]["extra_info"]["difficulty"] is None
    assert "verl_reward_style" not in rows[0]["extra_info"]


# --- item 7: bounded memory (batches) and progress on long offline steps ------------------------------
def _batch_sizes(monkeypatch):
    """Every batch the dataset-version writer receives, by size (the writer is the only sink)."""
    from devenus.records import versions

    sizes = []
    real = versions.VersionWriter.write

    def spy(self, rows):
        if not hasattr(rows, "num_rows"):  # (a records table, as the import hands it over, counts its rows)
            rows = list(rows)
        sizes.append(rows.num_rows if hasattr(rows, "num_rows") else len(rows))
        return real(self, rows)

    monkeypatch.setattr(versions.VersionWriter, "write", spy)
    return sizes


def test_import_and_hide_labels_stream_in_batches_of_at_most_batch_rows(tmp_path, monkeypatch):
    from devenus.records.labels import hide_labels_file

    n, batch = 1000, 64
    src = jsonl(tmp_path / "big.jsonl", [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(n)])
    sizes = _batch_sizes(monkeypatch)
    import_file(src, tmp_path / "d.parquet", batch_rows=batch, progress=False, source="t")
    assert sum(sizes) == n and max(sizes) <= batch and len(sizes) >= n // batch  # never the whole file at once
    sizes.clear()
    hide_labels_file(tmp_path / "d.parquet", tmp_path / "h.parquet", 0.1, batch_rows=batch, progress=False)
    assert sum(sizes) == n and max(sizes) <= batch


def test_import_and_hide_labels_show_a_progress_bar(tmp_path, capsys):
    from devenus.records.labels import hide_labels_file

    src = jsonl(tmp_path / "p.jsonl", [{"question": f"What is {i} + 2?", "answer": str(i + 2)} for i in range(300)])
    import_file(src, tmp_path / "d.parquet", batch_rows=50, progress=True, source="t")
    err = capsys.readouterr().err
    assert "rows" in err and "p.jsonl" in err, err[-500:]
    hide_labels_file(tmp_path / "d.parquet", tmp_path / "h.parquet", 0.5, batch_rows=50, progress=True)
    err = capsys.readouterr().err
    assert "rows" in err and "hide" in err, err[-500:]
    import_file(src, tmp_path / "q.parquet", progress=False, source="t")
    assert "rows" not in capsys.readouterr().err  # --no-progress means none


# --- issue 21, bad-input classes 3 and 5: deep nesting and long fields --------------------------------
@pytest.mark.timeout(20)
def test_a_10mb_answer_is_refused_by_its_length_before_any_pattern_runs(tmp_path):
    """A 10 MB digit string ran the scientific-notation pattern for ~10 minutes (it backtracked over
    every split of the digits); the length limit now comes first and the patterns are linear."""
    from devenus.records.importer.normalise import _SCIENTIFIC, MAX_ANSWER_FIELD_CHARS, normalise_target

    big = "1" * 10_000_000
    p = jsonl(tmp_path / "long.jsonl", [{"question": "ok?", "answer": "7"}, {"question": "long?", "answer": big},
                                        {"question": "hash?", "answer": "#### " + big},
                                        {"question": "mid?", "answer": "2" * 90_000}])
    rows, s = import_raw_with_summary(p, source="l")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["7"]
    assert [(r.where, r.field) for r in s.refusals] == [("line 2", "answer"), ("line 3", "answer"), ("line 4", "answer")]
    assert f"10000000 characters; an answer field holds at most {MAX_ANSWER_FIELD_CHARS}" in s.refusals[0].why
    assert "90000 characters; the verifier extracts answers of at most" in s.refusals[2].why
    # the patterns themselves are linear: a long near-miss fails in one scan
    assert _SCIENTIFIC.fullmatch("1" * 200_000 + "x") is None
    assert normalise_target("3" * 99_000 + "e", "answer")[2].startswith("99001 characters")


def test_deeply_nested_json_is_one_error_naming_the_line_and_field(tmp_path):
    deep = "[" * 5000 + "]" * 5000
    p = jsonl(tmp_path / "deep.jsonl", ['{"question": "a?", "answer": "1"}',
                                        '{"question": "b?", "answer": "2", "meta": ' + deep + "}"])
    with pytest.raises(RecordError) as ei:
        import_raw(p, source="d")
    assert "line 2: field 'meta' is nested too deeply to read (over 500 levels" in str(ei.value)
    j = tmp_path / "deep.json"
    j.write_text('[{"question": "a?", "answer": "1"}, {"question": "b?", "answer": "2", "meta": ' + deep + "}]")
    with pytest.raises(RecordError, match=r"record 1, field 'meta' is nested too deeply to read"):
        import_raw(j, source="d")
    ok = jsonl(tmp_path / "ok.jsonl", ['{"question": "a?", "answer": "1", "meta": ' + "[" * 200 + "]" * 200 + "}"])
    assert len(import_raw(ok, source="d")) == 1  # nesting the reader handles is still fine


# --- issue 21, item 8: the pyarrow blocks give what the record-by-record reading gives ---------------
def _mixed_inputs(tmp_path):
    """Files whose blocks differ: plain ones (pyarrow's) and ones with a refusal, a float answer, a
    blank line, a quoted CSV field or a ragged row (Python's), the latter late in the file."""
    recs = [{"question": f"What is {i} + 1?", "answer": str(i + 1), "level": i % 5} for i in range(300)]
    recs[150]["answer"] = True  # refused
    recs[200]["answer"] = 2.5  # a float: Python keeps it as a Decimal
    lines = [json.dumps(r) for r in recs]
    lines.insert(250, "   ")  # a blank line
    j = tmp_path / "mixed.jsonl"
    j.write_text("\n".join(lines) + "\n")
    c = tmp_path / "mixed.csv"
    c.write_text("question,answer\n" + "".join(f"What is {i} + 2?,{i + 2}\n" for i in range(200))
                 + '"What is 1, 2, 3?",3\n' + "".join(f"What is {i} + 3?,{i + 3}\n" for i in range(50)))
    bad = tmp_path / "ragged.csv"
    bad.write_text("question,answer\n" + "".join(f"What is {i} + 2?,{i + 2}\n" for i in range(200)) + "What?,1,2\n")
    return j, c, bad


def test_pyarrow_blocks_and_python_records_give_the_same_rows_and_errors(tmp_path, monkeypatch):
    from devenus.records.importer import chunks

    j, c, bad = _mixed_inputs(tmp_path)
    whole = {p: import_raw_with_summary(p, source="m", labeled="auto") for p in (j, c)}
    with pytest.raises(RecordError) as whole_err:
        import_raw(bad, source="m")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 512)  # many blocks: most read by pyarrow
    for p in (j, c):
        rows, s = import_raw_with_summary(p, source="m", labeled="auto")
        assert rows == whole[p][0] and s == whole[p][1]
    assert [(r.where, r.field) for r in whole[j][1].refusals] == [("line 151", "answer")]
    assert {r["extra_info"]["question"]: r["reward_model"]["ground_truth"] for r in whole[j][0]}["What is 200 + 1?"] == "2.5"
    with pytest.raises(RecordError) as err:
        import_raw(bad, source="m")
    assert str(err.value) == str(whole_err.value) and "line 202: expected 2 fields" in str(err.value)
    # and the written version is the same bytes
    import_file(j, tmp_path / "a.parquet", source="m", labeled="auto", progress=False)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 22)
    import_file(j, tmp_path / "b.parquet", source="m", labeled="auto", progress=False)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_a_column_whose_values_start_late_is_detected_over_the_whole_input(tmp_path, monkeypatch):
    """The field map is taken from the first block and checked against the whole input's at the end;
    where they differ (answers only in later blocks) the import converts again with the whole one."""
    from devenus.records.importer import chunks

    recs = [{"question": f"What is {i}?"} for i in range(100)] + [{"question": f"Why {i}?", "answer": str(i)} for i in range(20)]
    src = jsonl(tmp_path / "late.jsonl", recs)
    expect = import_raw(src, source="l", labeled="auto")  # one block: the whole input at once
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 256)
    summary, m = import_file(src, tmp_path / "d.parquet", source="l", labeled="auto", progress=False)
    assert summary.answer_field == "answer" and summary.labeled == 20 and m.output["rows"] == 120
    assert read_records(tmp_path / "d.parquet") == expect
    assert import_raw(src, source="l", labeled="auto") == expect
    with pytest.raises(RecordError, match="no answer column detected"):  # labeled=True: the whole input decides
        import_raw(jsonl(tmp_path / "none.jsonl", recs[:100]), source="l")
