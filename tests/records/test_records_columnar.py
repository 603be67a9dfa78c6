"""The version writer's column-wise path: a pyarrow Table is checked, typed, written and its changes
encoded exactly as the same rows as dicts are (same issues, same bytes), without a step per row."""

from __future__ import annotations

import copy
import hashlib
import json
import sys

import pyarrow as pa
import pytest

from devenus.records import RecordError, make_row
from devenus.records.columnar import PY_WHITESPACE, table_changes, table_schema
from devenus.records.io import normalize_rows
from devenus.records.column_rules import covered
from devenus.records.validate import find_issues, find_table_issues
from devenus.records.versions import Change, VersionWriter, _dumps, removal_lines, row_changes, write_version


def rows(n=6, start=0):
    out = []
    for i in range(start, start + n):
        labeled = i % 2 == 0
        out.append(make_row(data_source="t", index=f"t/{i}", source="t", question=f"What is {i}+{i}?",
                            ground_truth=str(2 * i) if labeled else "", labeled=labeled, extra={"difficulty": i % 3},
                            simulation=None if labeled else {"hidden_answer": str(2 * i), "noise": "none"}))
    return out


def table_of(rs):
    norm, schema = normalize_rows(rs)
    return pa.Table.from_pylist(norm, schema=schema)


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_python_whitespace_is_what_strip_removes():
    assert set(PY_WHITESPACE) == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}


def test_blank_is_empty_after_strip_whatever_the_first_character():
    """_blank trims only the strings that start with whitespace (or are empty): the result is still
    ``not value.strip()`` for every value, null included."""
    import random

    from devenus.records.column_rules import _blank

    rng = random.Random(0)
    chars = [*PY_WHITESPACE, "a", "\u00e9", "\u200b", "\x00", "\uff58"]  # (zero-width space: not whitespace)
    for _ in range(200):
        vals = [None if rng.random() < 0.1 else "".join(rng.choice(chars) for _ in range(rng.randint(0, 4)))
                for _ in range(rng.randint(1, 30))]
        col = pa.array(vals, pa.string())
        want = [v is None or not v.strip() for v in vals]
        assert _blank(col).to_pylist() == want
        assert _blank(pa.chunked_array([col.slice(0, 2), col.slice(2)])).to_pylist() == want


def test_table_and_dict_rows_write_byte_identical_versions(tmp_path):
    rs = rows(9)
    changes = row_changes(rs[1], {**rs[1], "reward_model": {"style": "rule", "ground_truth": "x"}}, "why")
    for name, batches in (("dicts", [rs[:4], rs[4:]]), ("table", [table_of(rs[:4]), table_of(rs[4:])]),
                          ("batch", [table_of(rs[:4]).to_batches()[0], table_of(rs[4:])])):
        write_version(iter(batches), tmp_path / f"{name}.parquet", rule="r", config={"k": 1}, changes=changes)
    for name in ("table", "batch"):
        assert sha(tmp_path / f"{name}.parquet") == sha(tmp_path / "dicts.parquet")
        assert (tmp_path / f"{name}.manifest.json").read_text().replace(name, "dicts") == \
            (tmp_path / "dicts.manifest.json").read_text()


def test_schema_is_the_one_rows_get():
    rs = rows(4)
    for r in rs:
        r["extra_info"]["note"] = None  # all null: a string column for the rows
        r["score"] = 1.5
    rs[2]["extra_info"]["tags"] = ["a"]
    t = table_of(rs)
    assert table_schema(t).equals(normalize_rows(t.to_pylist())[1])


def _bad_rows():
    rs = rows(14)
    rs[0]["data_source"] = " \x1c"  # blank by str.strip (\x1c is whitespace to Python)
    rs[1]["prompt"] = [{"role": "system", "content": "only a system message"}]
    rs[2]["prompt"] = [{"role": "robot", "content": ""}]
    rs[3]["reward_model"]["style"] = "model"
    rs[4]["extra_info"]["labeled"] = True  # labeled, label_source none, empty target
    rs[5]["extra_info"]["label_source"] = "oracle"
    rs[6]["reward_model"]["ground_truth"] = "  "  # labeled row with a blank target
    rs[7]["reward_model"]["ground_truth"] = "leak"  # unlabeled row with a target
    rs[8]["extra_info"]["index"] = "t/3"  # duplicate of a valid earlier row
    rs[9]["simulation"]["noise"] = "loud"
    rs[10]["extra_info"]["index"] = "t/3"  # a second duplicate
    rs[11]["extra_info"]["split"] = "\u3000"
    rs[12]["prompt"] = []
    rs[13]["ability"] = ""
    return rs


def test_column_checks_name_each_row_they_flag():
    t = table_of(_bad_rows())
    got = [(i.row, i.field) for i in find_table_issues(t)]
    assert got == [(0, "data_source"), (1, "prompt"), (2, "prompt[0].role"), (2, "prompt[0].content"), (2, "prompt"),
                   (3, "reward_model.style"), (5, "extra_info.label_source"), (6, "reward_model.ground_truth"),
                   (7, "reward_model.ground_truth"), (8, "extra_info.index"), (9, "simulation.noise"),
                   (10, "extra_info.index"), (11, "extra_info.split"), (12, "prompt"), (13, "ability")]
    assert find_issues(_bad_rows()) == find_table_issues(t)  # rows in memory: the same table, the same issues
    assert find_table_issues(table_of(rows(20))) == []
    # a duplicate whose first occurrence breaks a rule too: the checker still names that row
    rs = rows(5)
    rs[1]["ability"] = " "
    rs[4]["extra_info"]["index"] = "t/1"
    assert [(i.row, i.field, i.message) for i in find_table_issues(table_of(rs))] == [
        (1, "ability", "expected a non-empty str, found str ' '"),
        (4, "extra_info.index", "expected a unique key, found a duplicate of row 1")]


def test_a_single_row_named_whole_gets_the_issues_the_column_rules_find():
    # one row skips the column rules (the checker names it whole): the same issues as in a table
    many = find_table_issues(table_of(_bad_rows()))
    named = 0
    for i, r in enumerate(_bad_rows()):
        if i in (8, 10):
            continue  # (duplicates need the other rows)
        one = [(x.field, x.message) for x in find_issues([r])]
        assert one == [(x.field, x.message) for x in many if x.row == i], i
        named += bool(one)
    assert named == 11


def test_layouts_the_columns_do_not_cover_are_checked_as_rows():
    t = table_of(rows(3)).drop_columns(["ability"])
    assert not covered(t.schema)
    assert [(i.row, i.field, i.message) for i in find_table_issues(t)] == [(i, "ability", "missing") for i in range(3)]
    t = table_of(rows(3))
    t = t.set_column(t.schema.get_field_index("data_source"), "data_source", pa.array([1, 2, 3]))
    assert not covered(t.schema)
    assert [(i.row, i.field) for i in find_table_issues(t)] == [(i, "data_source") for i in range(3)]
    assert all("expected a non-empty str, found int" in i.message for i in find_table_issues(t))


def test_writer_errors_are_the_same_for_a_table(tmp_path):
    messages = []
    for k, batch in enumerate((_bad_rows(), table_of(_bad_rows()))):
        with pytest.raises(RecordError) as e:
            with VersionWriter(tmp_path / f"bad{k}.parquet", rule="r") as w:
                w.write(rows(2, start=100))
                w.write(batch)
        messages.append(str(e.value).replace(f"bad{k}", "bad"))
    assert messages[0] == messages[1] and "row 2 " in messages[0]
    with pytest.raises(RecordError, match="row 4 .*duplicate of an earlier row"):
        with VersionWriter(tmp_path / "dup.parquet", rule="r") as w:
            w.write(table_of(rows(3)))
            w.write(table_of(rows(2, start=1)))
    assert not list(tmp_path.iterdir())  # nothing written, no temp files left


STRINGS = ["plain", 'quote " and \\ backslash', "new\nline\ttab\r\b\f", "ctrl \x01\x1f", "ünïcode ✓ \u2028", ""]


def test_table_changes_match_row_changes_line_for_line():
    before = rows(len(STRINGS))
    after = copy.deepcopy(before)
    for i, s in enumerate(STRINGS):
        after[i]["reward_model"]["ground_truth"] = s
        after[i]["extra_info"]["difficulty"] = None if i % 2 else 7
        if i % 3 == 0:
            after[i]["simulation"] = {"hidden_answer": s or None, "noise": "none"}
        if i == 4:
            after[i] = copy.deepcopy(before[i])  # no change at all
    whys = [f"why {i} \"q\"" for i in range(len(before))]
    t = table_changes(table_of(before), table_of(after), pa.array(whys))
    want = [(i, c) for i in range(len(before)) for c in row_changes(before[i], after[i], whys[i])]
    assert t.column("row").to_pylist() == [i for i, _ in want]
    assert t.column("line").to_pylist() == [_dumps(c.to_json()) for _, c in want]
    assert [json.loads(x) for x in t.column("line").to_pylist()] == [c.to_json() for _, c in want]


def test_column_changes_go_to_the_manifest_as_row_changes_do(tmp_path):
    rs = rows(4)
    new = copy.deepcopy(rs)
    new[1]["reward_model"]["ground_truth"] = 'a "b"\n'
    new[1]["extra_info"]["labeled"], new[1]["extra_info"]["label_source"] = True, "annotated"
    why = "annotated"
    keys = pa.array(["t/0", "t/3"])
    with VersionWriter(tmp_path / "a.parquet", rule="r") as w:
        w.write(table_of(new))
        w.add_change_lines(table_changes(table_of(rs), table_of(new), why))
        w.add_change_lines(removal_lines(keys, "gone"))
    with VersionWriter(tmp_path / "b.parquet", rule="r") as w2:
        w2.write(new)
        for r0, r1 in zip(rs, new):
            w2.add_changes(row_changes(r0, r1, why))
        w2.remove("t/0", "gone")
        w2.remove("t/3", "gone")
    # the change file (the manifest names it) holds the same lines, so the manifests differ only in names
    assert (tmp_path / "a.changes.jsonl").read_bytes() == (tmp_path / "b.changes.jsonl").read_bytes()
    assert (tmp_path / "a.manifest.json").read_text().replace("a.parquet", "b.parquet") == \
        (tmp_path / "b.manifest.json").read_text()
    assert w.manifest.counts == w2.manifest.counts
    assert w.manifest.changes[0] == Change("t/1", "extra_info.label_source", "none", "annotated", why)


def test_a_key_of_the_wrong_type_is_a_contract_error_not_a_crash(tmp_path):
    rs = rows(2)
    rs[1]["extra_info"]["index"] = ["t/1"]  # unhashable
    with pytest.raises(RecordError, match=r"row 1: extra_info.index: expected a non-empty str"):
        with VersionWriter(tmp_path / "k.parquet", rule="r") as w:
            w.write(rs)
