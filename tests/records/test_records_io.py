"""Parquet round trip, pandas readability and atomic writes."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow.parquet as pq
import pytest

import devenus.atomic as atomic
import devenus.records.io as rio
from devenus.records import (
    RecordError,
    make_row,
    normalize_rows,
    read_records,
    records_schema,
    records_to_table,
    write_records,
)


def rows3():
    return [
        make_row(data_source="gsm8k", index="gsm8k/0", source="gsm8k", question="1+1?", answer="2",
                 system_prompt="Think.", extra={"difficulty": 1, "family": "add", "view": "original",
                                               "pair_key": "p0", "tag": "a"}),
        make_row(data_source="gsm8k", index="gsm8k/1", source="gsm8k", question="2+2?", labeled=False,
                 simulation={"hidden_answer": "4", "noise": "none"}),
        make_row(data_source="math", index="math/2", source="math", question="3+3?", answer="6",
                 label_source="corrected", split="test",
                 simulation={"hidden_answer": "6", "noise": "active", "seed": 3}),
    ]


def test_round_trip(tmp_path):
    rows = rows3()
    path = write_records(rows, tmp_path / "d.parquet")
    assert path == tmp_path / "d.parquet"
    back = read_records(path)
    expected, _ = normalize_rows(rows)
    assert back == expected
    # the standard fields come back exactly; missing optional keys are filled with None
    assert back[0]["prompt"] == rows[0]["prompt"]
    assert back[1]["extra_info"]["tag"] is None and back[1]["extra_info"]["difficulty"] is None
    assert back[0]["simulation"] is None
    assert back[1]["simulation"] == {"hidden_answer": "4", "noise": "none", "seed": None}
    assert back[2]["simulation"]["seed"] == 3
    # plain python containers, no numpy
    assert type(back[0]["prompt"]) is list and type(back[0]["prompt"][0]) is dict
    assert type(back[0]["extra_info"]["difficulty"]) is int


def test_round_trip_write_twice_same_rows(tmp_path):
    a = write_records(rows3(), tmp_path / "a.parquet")
    b = write_records(read_records(a), tmp_path / "b.parquet")
    assert read_records(a) == read_records(b)
    assert pq.read_schema(a).equals(pq.read_schema(b), check_metadata=False)


def test_pandas_reads_expected_nested_columns(tmp_path):
    path = write_records(rows3(), tmp_path / "d.parquet")
    df = pd.read_parquet(path)
    assert list(df.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info", "simulation"]
    assert len(df) == 3
    assert list(df["prompt"][0][1].keys()) == ["role", "content"]
    assert df["prompt"][0][1]["content"] == "1+1?"
    assert df["reward_model"][0] == {"style": "rule", "ground_truth": "2"}
    assert df["extra_info"][2]["index"] == "math/2"
    assert df["extra_info"][1]["labeled"] is False or df["extra_info"][1]["labeled"] == False  # noqa: E712
    assert df["simulation"][0] is None
    assert df["simulation"][1]["hidden_answer"] == "4"


def test_empty_fields_have_stable_types(tmp_path):
    # every optional field None and no simulation anywhere: the schema is still the explicit one
    rows = [make_row(data_source="d", index="d/0", source="d", question="q?", labeled=False)]
    path = write_records(rows, tmp_path / "e.parquet")
    schema = pq.read_schema(path)
    assert schema.equals(records_schema(), check_metadata=False)
    assert schema.metadata[b"devenus.records"] == b"1"


def test_write_validates(tmp_path):
    rows = rows3()
    rows[1]["extra_info"]["index"] = "gsm8k/0"
    with pytest.raises(RecordError, match="duplicate"):
        write_records(rows, tmp_path / "d.parquet")
    assert not (tmp_path / "d.parquet").exists()
    assert list(tmp_path.iterdir()) == []


def test_read_validates_and_names_file(tmp_path):
    rows = rows3()
    rows[0]["reward_model"]["ground_truth"] = ""
    path = write_records(rows, tmp_path / "bad.parquet", validate=False)
    with pytest.raises(RecordError) as ei:
        read_records(path)
    assert str(path) in str(ei.value)
    assert ei.value.issues[0].field == "reward_model.ground_truth"
    assert len(read_records(path, validate=False)) == 3


def test_read_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_records(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(RecordError, match="cannot read"):
        read_records(junk)


def test_read_pandas_written_file(tmp_path):
    # a file written by pandas (index column, numpy in cells) reads back as plain records
    path = tmp_path / "pd.parquet"
    pd.DataFrame(rows3()).set_index(pd.Index([10, 11, 12])).to_parquet(path)
    back = read_records(path)
    assert [r["extra_info"]["index"] for r in back] == ["gsm8k/0", "gsm8k/1", "math/2"]
    assert "__index_level_0__" not in back[0]


def test_dataframe_input_round_trip(tmp_path):
    p1 = write_records(rows3(), tmp_path / "a.parquet")
    df = pd.read_parquet(p1)  # numpy arrays and float-ified ints inside
    p2 = write_records(df, tmp_path / "b.parquet")
    assert read_records(p2) == read_records(p1)


def test_records_to_table(tmp_path):
    t = records_to_table(rows3())
    assert t.num_rows == 3
    assert t.schema.field("extra_info").type.get_field_index("tag") >= 0
    with pytest.raises(RecordError):
        records_to_table([{"prompt": []}])


class Crash(RuntimeError):
    pass


def _crashing_writer(table, fileobj):
    fileobj.write(b"PAR1 partial bytes")
    raise Crash("disk died mid-write")


def test_atomic_write_crash_keeps_existing_file(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    write_records(rows3(), path)
    before = path.read_bytes()
    monkeypatch.setattr(rio, "_write_parquet", _crashing_writer)
    new_rows = rows3()[:1]
    with pytest.raises(Crash):
        write_records(new_rows, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet"]  # no temp file left
    assert len(read_records(path)) == 3


def test_atomic_write_crash_without_existing_file(tmp_path, monkeypatch):
    monkeypatch.setattr(rio, "_write_parquet", _crashing_writer)
    with pytest.raises(Crash):
        write_records(rows3(), tmp_path / "new.parquet")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_crash_at_rename(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    write_records(rows3(), path)
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError, match="rename failed"):
        write_records(rows3()[:2], path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet"]


def test_write_replaces_and_creates_parents(tmp_path):
    path = tmp_path / "sub" / "dir" / "d.parquet"
    write_records(rows3(), path)
    write_records(rows3()[:1], path)
    assert len(read_records(path)) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["d.parquet"]
    # permissions follow the umask like a plain open() would, not mkstemp's 0600
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~atomic._umask()


# ------------------------------------------------------------------------------ the one atomic-write helper
def test_atomic_files_commit_together_and_put_back_what_a_failed_rename_replaced(tmp_path, monkeypatch):
    from devenus.atomic import AtomicFiles

    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"old a")
    with AtomicFiles([a, b]) as (ta, tb):
        ta.write_bytes(b"new a")
        tb.write_bytes(b"new b")
    assert (a.read_bytes(), b.read_bytes()) == (b"new a", b"new b")
    real = atomic.commit_temp

    def fail_on_b(tmp, path, **kw):
        if path.name == "b.bin":
            raise OSError(28, "No space left on device")
        return real(tmp, path, **kw)

    monkeypatch.setattr(atomic, "commit_temp", fail_on_b)
    with pytest.raises(OSError):
        with AtomicFiles([a, tmp_path / "c.bin", b]) as temps:
            for t in temps:
                t.write_bytes(b"newer")
    # a was replaced and is put back; c did not exist and is gone again; b never changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.bin"]
    assert (a.read_bytes(), b.read_bytes()) == (b"new a", b"new b")


def test_atomic_write_and_atomic_dir_leave_the_old_state_on_an_exception(tmp_path):
    from devenus.atomic import atomic_dir, atomic_write, write_text_atomic

    f = write_text_atomic(tmp_path / "r.json", "{}\n")
    with pytest.raises(RuntimeError):
        with atomic_write(f) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert f.read_text() == "{}\n"
    with atomic_write(tmp_path / "state.pt", hidden=False) as tmp:  # torch-style: no dot-file
        assert not tmp.name.startswith(".")
        tmp.write_bytes(b"x")
    d = tmp_path / "folder"
    with atomic_dir(d) as tmp:
        (tmp / "one").write_text("1")
    with pytest.raises(RuntimeError):
        with atomic_dir(d) as tmp:
            (tmp / "two").write_text("2")
            raise RuntimeError("build failed")
    assert [p.name for p in d.iterdir()] == ["one"]
    with atomic_dir(d) as tmp:  # a rebuild replaces the folder whole
        (tmp / "two").write_text("2")
    assert [p.name for p in d.iterdir()] == ["two"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "r.json", "state.pt"]
