"""The evidence table: appended by online steps, read by offline tools."""

from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

from devenus.records.evidence import (
    EVIDENCE_COLUMNS,
    EvidenceError,
    EvidenceWriter,
    evidence_schema,
    evidence_table,
    read_evidence,
)


def test_append_flush_and_read_back(tmp_path):
    d = tmp_path / "ev"
    with EvidenceWriter(d, method="ttrl", round=0, flush_rows=3) as w:
        for step in (1, 2):
            for i in range(2):
                w.append(f"s/{i}", step, "vote", majority_answer=str(step + i), majority_pass_rate=0.75,
                         target_pass_rate=None, values={"entropy": 0.5 * i, "answers": ["1", "2"]})
    parts = sorted(p.name for p in d.iterdir())
    assert parts == ["part-000000-r0-s1-2.parquet", "part-000001-r0-s2-2.parquet"]  # 3 rows, then 1 at close
    assert pq.read_schema(d / parts[0]).names == list(EVIDENCE_COLUMNS)
    rows = read_evidence(d)
    assert [(r["key"], r["step"]) for r in rows] == [("s/0", 1), ("s/1", 1), ("s/0", 2), ("s/1", 2)]
    assert rows[1]["values"] == {"entropy": 0.5, "answers": ["1", "2"]}
    assert rows[0]["majority_pass_rate"] == 0.75 and rows[0]["target_pass_rate"] is None
    assert rows[3]["majority_answer"] == "3" and rows[3]["method"] == "ttrl" and rows[3]["round"] == 0


def test_filters_by_kind_round_method_and_keys(tmp_path):
    for rnd in (0, 1):
        with EvidenceWriter(tmp_path, method="olr", round=rnd) as w:
            w.append("a", 5, "probe", target_pass_rate=0.25)
            w.append("b", 5, "vote", majority_answer="7")
    with EvidenceWriter(tmp_path, method="trapo", round=1) as w:
        w.append("a", 6, "probe")
    assert len(read_evidence(tmp_path)) == 5
    assert [(r["key"], r["round"]) for r in read_evidence(tmp_path, kind="probe", round=1)] == [("a", 1), ("a", 1)]
    assert [r["method"] for r in read_evidence(tmp_path, kind="probe", round=1, method="olr")] == ["olr"]
    assert {r["key"] for r in read_evidence(tmp_path, keys=["b"])} == {"b"}
    assert evidence_table(tmp_path, kind="nothing").num_rows == 0


def test_a_resumed_run_rewriting_a_step_wins_over_the_old_part(tmp_path):
    with EvidenceWriter(tmp_path, method="ttrl") as w:
        w.append("a", 3, "vote", majority_answer="1")
        w.append("a", 4, "vote", majority_answer="1")
    # the run resumes from its step-3 checkpoint and records step 4 again
    with EvidenceWriter(tmp_path, method="ttrl") as w:
        w.append("a", 4, "vote", majority_answer="2")
    rows = read_evidence(tmp_path)
    assert [(r["step"], r["majority_answer"]) for r in rows] == [(3, "1"), (4, "2")]


def test_bad_rows_are_refused_with_the_field(tmp_path):
    w = EvidenceWriter(tmp_path, method="m")
    with pytest.raises(EvidenceError, match="key: expected a non-empty str"):
        w.append("", 1, "vote")
    with pytest.raises(EvidenceError, match="step: expected an int"):
        w.append("a", 1.5, "vote")
    with pytest.raises(EvidenceError, match=r"majority_pass_rate: expected a number in \[0, 1\]"):
        w.append("a", 1, "vote", majority_pass_rate=1.5)
    with pytest.raises(EvidenceError, match="values: expected JSON values"):
        w.append("a", 1, "vote", values={"x": math.inf})
    w.append("a", 1, "vote", majority_pass_rate=math.nan)  # NaN = unknown
    w.close()
    assert read_evidence(tmp_path)[0]["majority_pass_rate"] is None


def test_nothing_written_until_flush_and_part_writes_are_atomic(tmp_path):
    w = EvidenceWriter(tmp_path / "ev", method="m", flush_rows=100)
    w.append("a", 1, "vote")
    assert not (tmp_path / "ev").exists()  # buffered: no IO per append
    w.flush()
    assert [p.name for p in (tmp_path / "ev").iterdir()] == ["part-000000-r0-s1-1.parquet"]
    assert pq.read_schema(w.written[0]).equals(evidence_schema(), check_metadata=False)
    with pytest.raises(EvidenceError, match="not found"):
        read_evidence(tmp_path / "missing")


@pytest.mark.parametrize("column, value, message", [
    ("values", "[1, 2]", "values: expected the JSON text of an object, found a list"),
    ("values", "{'a': 1}", "values: expected the JSON text of an object, found \"{'a': 1}\" (not JSON: Expecting"),
    ("values", '{"a": Infinity}', "values: expected the JSON text of an object, found '{\"a\": Infinity}' (not JSON: "
                                  "Infinity is not a JSON value)"),
    ("majority_pass_rate", 7.0, "majority_pass_rate: expected a number in [0, 1] or None, found 7.0"),
    ("target_pass_rate", -0.5, "target_pass_rate: expected a number in [0, 1] or None, found -0.5"),
    ("key", "", "key: expected a non-empty str"),
    ("method", "", "method: expected a non-empty str"),
])
def test_a_part_not_written_by_the_writer_is_refused_naming_part_row_and_field(tmp_path, column, value, message):
    """The reader checks every row against the writer's own checks (one definition): one line, no guess."""
    import re

    import pyarrow as pa

    with EvidenceWriter(tmp_path, method="m") as w:
        w.append("a", 1, "vote", values={"x": 1})
    good = {"key": "b", "round": 0, "step": 2, "kind": "vote", "method": "m", "majority_answer": None,
            "majority_pass_rate": 0.5, "target_pass_rate": None, "values": "{}"}
    part = tmp_path / "part-000001-r0-s2-2.parquet"
    pq.write_table(pa.Table.from_pylist([good, {**good, column: value}], schema=evidence_schema()), str(part))
    with pytest.raises(EvidenceError, match=f"^evidence part {re.escape(str(part))}: row 1 \\(key .*\\): {re.escape(message)}") as e:
        read_evidence(tmp_path)
    assert "\n" not in str(e.value)
    assert len(read_evidence(tmp_path, keys=["a"])) == 1  # rows not read are not judged
