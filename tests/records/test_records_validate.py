"""The record contract: make_row, validate_rows and its error paths, the method view."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from devenus.records import (
    LABEL_SOURCES,
    RecordError,
    find_issues,
    make_row,
    method_view,
    records_schema,
    simulation_view,
    strip_simulation,
    validate_rows,
)


def row(i: int = 0, **kw):
    args = dict(data_source="toy", index=f"toy/{i}", source="toy", question=f"What is {i}+1?", answer=str(i + 1))
    args.update(kw)
    return make_row(**args)


def unlabeled(i: int = 0, **kw):
    return row(i, answer=None, labeled=False, **kw)


def issues_of(rows):
    with pytest.raises(RecordError) as ei:
        validate_rows(rows)
    return ei.value


# --- make_row ---------------------------------------------------------------------------------------
def test_make_row_shape():
    r = row(3, system_prompt="Be brief.", extra={"difficulty": 2, "family": "add", "view": "original"})
    assert r["data_source"] == "toy"
    assert r["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 3+1?"},
    ]
    assert r["ability"] == "math"
    assert r["reward_model"] == {"style": "rule", "ground_truth": "4"}
    ei = r["extra_info"]
    assert ei["index"] == "toy/3" and ei["labeled"] is True and ei["label_source"] == "gold"
    assert ei["source"] == "toy" and ei["split"] == "train"
    assert ei["difficulty"] == 2 and ei["family"] == "add" and ei["view"] == "original"
    assert ei["pair_key"] is None and ei["question"] == "What is 3+1?"
    assert r["simulation"] is None


def test_make_row_unlabeled_defaults():
    r = unlabeled(1)
    assert r["reward_model"]["ground_truth"] == ""
    assert r["extra_info"]["labeled"] is False
    assert r["extra_info"]["label_source"] == "none"


def test_make_row_prompt_messages_and_simulation():
    msgs = [{"role": "user", "content": "q?"}]
    r = make_row(data_source="d", index="d/1", source="d", prompt=msgs, labeled=False,
                 simulation={"hidden_answer": "7"})
    assert r["prompt"] == msgs and r["prompt"] is not msgs
    assert r["simulation"] == {"hidden_answer": "7", "noise": None}
    assert r["extra_info"]["question"] is None


def test_make_row_argument_errors():
    with pytest.raises(ValueError, match="exactly one of question= or prompt="):
        make_row(data_source="d", index="d/1", source="d")
    with pytest.raises(ValueError, match="aliases"):
        row(answer="1", ground_truth="1")
    with pytest.raises(ValueError, match="required extra_info key 'index'"):
        row(extra={"index": "other"})
    with pytest.raises(ValueError, match="system_prompt"):
        make_row(data_source="d", index="d/1", source="d", prompt=[{"role": "user", "content": "q"}],
                 system_prompt="s")


def test_make_row_validates():
    with pytest.raises(RecordError, match="ground_truth"):
        row(answer="")  # labeled without target
    assert row(answer="", validate=False)["reward_model"]["ground_truth"] == ""


def test_schema_is_explicit():
    import pyarrow as pa

    s = records_schema()
    assert s.names == ["data_source", "prompt", "ability", "reward_model", "extra_info", "simulation"]
    ei = s.field("extra_info").type
    assert ei.field("index").type == pa.string()
    assert ei.field("labeled").type == pa.bool_()
    assert ei.field("difficulty").type == pa.int64()
    assert s.field("prompt").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    assert s.field("simulation").type.field("hidden_answer").type == pa.string()


# --- valid rows pass --------------------------------------------------------------------------------
def test_valid_rows_pass():
    rows = [row(0), unlabeled(1), row(2, label_source="promoted"), row(3, label_source="corrected"),
            row(4, label_source="annotated", simulation={"hidden_answer": "9", "noise": "active"})]
    validate_rows(rows)
    validate_rows(pd.DataFrame(rows))
    assert find_issues(rows) == []


def test_empty_list_is_valid():
    validate_rows([])


# --- each rule ---------------------------------------------------------------------------------------
def test_duplicate_index():
    err = issues_of([row(0), row(1), row(0)])
    assert len(err.issues) == 1
    iss = err.issues[0]
    assert (iss.row, iss.key, iss.field) == (2, "toy/0", "extra_info.index")
    assert "duplicate of row 0" in str(err)


def test_labeled_without_target():
    r = row(0)
    r["reward_model"]["ground_truth"] = "  "
    err = issues_of([r])
    assert [(i.key, i.field) for i in err.issues] == [("toy/0", "reward_model.ground_truth")]
    assert "non-empty target for a labeled row" in str(err)


def test_label_state_consistency():
    a = row(0)
    a["extra_info"]["label_source"] = "none"  # labeled but source none
    b = unlabeled(1)
    b["extra_info"]["label_source"] = "gold"  # unlabeled but a source
    c = unlabeled(2)
    c["reward_model"]["ground_truth"] = "3"  # unlabeled with a target
    err = issues_of([a, b, c])
    got = {(i.key, i.field) for i in err.issues}
    assert got == {
        ("toy/0", "extra_info.label_source"),
        ("toy/1", "extra_info.label_source"),
        ("toy/2", "reward_model.ground_truth"),
    }
    text = str(err)
    assert "for a labeled row, found 'none'" in text
    assert "expected 'none' for an unlabeled row, found 'gold'" in text
    assert "hidden_answer" in text


@pytest.mark.parametrize("prompt, field", [
    ([], "prompt"),
    (None, "prompt"),
    ("What?", "prompt"),
    ([{"role": "system", "content": "s"}], "prompt"),  # no user message
    ([{"role": "user", "content": ""}], "prompt[0].content"),
    ([{"role": "robot", "content": "x"}, {"role": "user", "content": "q"}], "prompt[0].role"),
    ([{"role": "user", "content": 5}], "prompt[0].content"),
    ([{"role": "user", "content": "q", "name": "x"}], "prompt[0]"),
    (["q"], "prompt[0]"),
])
def test_bad_prompt(prompt, field):
    r = row(0)
    r["prompt"] = prompt
    err = issues_of([r])
    assert field in {i.field for i in err.issues}, str(err)
    assert all(i.key == "toy/0" for i in err.issues)


def test_missing_prompt_column():
    r = row(0)
    del r["prompt"]
    err = issues_of([r])
    assert [(i.field, i.message) for i in err.issues] == [("prompt", "missing")]


@pytest.mark.parametrize("path, value, expected", [
    (("reward_model", "ground_truth"), 42, "a str"),
    (("reward_model", "style"), "model", "'rule'"),
    (("extra_info", "labeled"), "true", "a bool"),
    (("extra_info", "labeled"), 1, "a bool"),
    (("extra_info", "index"), 7, "a non-empty str"),
    (("extra_info", "source"), "", "a non-empty str"),
    (("extra_info", "split"), None, "a non-empty str"),
    (("extra_info", "difficulty"), "hard", "a int or None"),
    (("extra_info", "difficulty"), True, "a int or None"),
    (("extra_info", "view"), 3, "a str or None"),
    (("data_source",), "", "a non-empty str"),
    (("ability",), 3, "a non-empty str"),
    (("simulation", "noise"), "loud", "one of ['none', 'inactive', 'active', 'sentinel', 'redraw']"),
    (("simulation", "hidden_answer"), 5, "a str or None"),
])
def test_wrong_types(path, value, expected):
    r = row(0, simulation={"hidden_answer": "1", "noise": "none"})
    target = r
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    err = issues_of([r])
    field = ".".join(path)
    match = [i for i in err.issues if i.field == field]
    assert match, str(err)
    assert f"expected {expected}" in match[0].message
    assert repr(value) in match[0].message  # what was found


def test_unknown_label_source():
    r = row(0)
    r["extra_info"]["label_source"] = "pseudo"
    err = issues_of([r])
    assert [i.field for i in err.issues] == ["extra_info.label_source"]
    assert str(list(LABEL_SOURCES)) in str(err) and "'pseudo'" in str(err)


def test_missing_required_extra_info_key_and_struct_types():
    a = row(0)
    del a["extra_info"]["labeled"]
    b = row(1)
    b["extra_info"] = "x"
    c = row(2)
    c["reward_model"] = {"style": "rule"}
    d = row(3)
    d["reward_model"]["extra"] = 1
    e = row(4)
    e["simulation"] = "hidden"
    err = issues_of([a, b, c, d, e])
    got = {(i.row, i.field) for i in err.issues}
    assert (0, "extra_info.labeled") in got
    assert (1, "extra_info") in got
    assert (2, "reward_model.ground_truth") in got
    assert (3, "reward_model") in got
    assert (4, "simulation") in got


def test_not_a_dict_row():
    err = issues_of([row(0), ["not", "a", "row"]])
    assert [(i.row, i.key, i.field) for i in err.issues] == [(1, None, "<row>")]


def test_row_without_key_is_named_by_number():
    r = row(0)
    r["extra_info"]["index"] = ""
    r["data_source"] = ""
    err = issues_of([row(1), r])
    assert all(i.row == 1 and i.key is None for i in err.issues)
    assert "row 1: data_source" in str(err)


def test_free_metadata_types_consistent_across_rows():
    a = row(0, extra={"tag": "x", "score": 1})
    b = row(1, extra={"tag": 3, "score": 2.5})  # str vs int is an error, int vs float is fine
    c = row(2, extra={"obj": object()}, validate=False)
    err = issues_of([a, b, c])
    assert {(i.row, i.field) for i in err.issues} == {(1, "extra_info.tag"), (2, "extra_info.obj")}
    assert "as in row 0" in str(err)


def test_all_errors_collected_in_one_message():
    a = row(0)
    a["extra_info"]["labeled"] = "yes"
    b = row(1)
    b["reward_model"]["ground_truth"] = ""
    c = row(2)
    c["prompt"] = []
    d = row(0)  # duplicate of a
    e = row(4)
    e["extra_info"]["label_source"] = "bogus"
    err = issues_of([a, b, c, d, e])
    msg = str(err)
    assert msg.startswith("records break the contract: 5 errors")
    for needle in [
        "row 0 (key 'toy/0'): extra_info.labeled: expected a bool, found str 'yes'",
        "row 1 (key 'toy/1'): reward_model.ground_truth:",
        "row 2 (key 'toy/2'): prompt:",
        "row 3 (key 'toy/0'): extra_info.index:",
        "row 4 (key 'toy/4'): extra_info.label_source:",
    ]:
        assert needle in msg, msg
    assert isinstance(err, ValueError)


def test_error_message_is_capped_but_issues_complete():
    rows = []
    for i in range(30):
        r = row(i)
        r["reward_model"]["style"] = "bad"
        rows.append(r)
    err = issues_of(rows)
    assert len(err.issues) == 30
    lines = str(err).splitlines()
    assert lines[0] == "records break the contract: 30 errors"
    assert len(lines) == 1 + 20 + 1
    assert lines[-1].strip() == "... and 10 more"


def test_dataframe_input_validated_too():
    rows = [row(0), row(0)]
    with pytest.raises(RecordError, match="duplicate"):
        validate_rows(pd.DataFrame(rows))


def test_validate_rejects_other_inputs():
    with pytest.raises(TypeError):
        validate_rows("not rows")


# --- rows in memory become a table once: what pyarrow would coerce is still named ---------------------
def _with(i, path, value, **kw):
    r = row(i, **kw)
    target = r
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return r


@pytest.mark.parametrize("path, value, expected", [
    (("extra_info", "difficulty"), 3.5, "a int or None"),  # pyarrow: 3
    (("extra_info", "difficulty"), 3.0, "a int or None"),  # pyarrow: 3
    (("extra_info", "index"), b"toy/1", "a non-empty str"),  # pyarrow: the text
    (("reward_model", "ground_truth"), b"2", "a str"),
    (("prompt", 0, "content"), b"What is 1+1?", "a non-empty str"),
    (("extra_info", "labeled"), 1, "a bool"),  # pyarrow refuses: the row stands empty in the table
    (("extra_info", "family"), ["a"], "a str or None"),
    (("data_source",), True, "a non-empty str"),
])
def test_values_pyarrow_would_coerce_are_refused_by_row_and_field(path, value, expected):
    rows = [row(0), _with(1, path, value), row(2)]
    err = issues_of(rows)
    field = ".".join(f"[{p}]" if isinstance(p, int) else p for p in path).replace(".[", "[")
    assert [(i.row, i.key, i.field) for i in err.issues] == [(1, "toy/1" if path[-1] != "index" else None, field)], str(err)
    assert f"expected {expected}" in err.issues[0].message and repr(value) in err.issues[0].message


def test_a_str_where_a_list_was_is_named_not_wrapped():
    a = row(0, extra={"tags": ["x", "y"]})
    b = row(1, extra={"tags": "z"})  # pyarrow would store ["z"]
    err = issues_of([a, b])
    assert [(i.row, i.field) for i in err.issues] == [(1, "extra_info.tags")]
    assert "expected list (as in row 0" in err.issues[0].message


def test_a_key_a_struct_lacks_is_named_not_dropped():
    r = row(0)
    r["simulation"] = {"hidden_answer": None, "noise": "none"}
    r["prompt"][0]["weight"] = 1
    err = issues_of([r])
    assert [(i.row, i.field) for i in err.issues] == [(0, "prompt[0]")]
    assert "extra ['weight']" in err.issues[0].message


def test_a_value_pyarrow_cannot_store_is_named_even_where_the_contract_allows_it():
    r = row(1, extra={"difficulty": 2**70}, validate=False)  # an int, but not an int64
    err = issues_of([row(0), r])
    assert [(i.row, i.field) for i in err.issues] == [(1, "extra_info")]
    assert err.issues[0].message.startswith("cannot be stored in a records table")


def test_good_rows_become_the_table_they_hold():
    from devenus.records.validate import rows_table

    rows = [row(0, extra={"difficulty": 2, "tags": ["a"]}), unlabeled(1, simulation={"hidden_answer": "2", "noise": "none"}),
            row(2, extra={"score": 1}), row(3, extra={"score": 2.5})]
    table, issues = rows_table(rows)
    assert issues == [] and table.num_rows == 4
    back = table.to_pylist()
    assert back[0]["extra_info"]["tags"] == ["a"] and back[3]["extra_info"]["score"] == 2.5
    assert back[2]["extra_info"]["score"] == 1.0  # int beside float: one float column, as the contract allows
    assert back[1]["simulation"] == {"hidden_answer": "2", "noise": "none"}


# --- method view -------------------------------------------------------------------------------------
def test_method_view_excludes_simulation_and_copies():
    r = row(0, simulation={"hidden_answer": "1", "noise": "active"})
    before = copy.deepcopy(r)
    v = method_view(r)
    assert "simulation" not in v
    v["extra_info"]["labeled"] = False
    v["prompt"].append({"role": "user", "content": "x"})
    assert r == before
    stripped = strip_simulation([r, unlabeled(1)])
    assert all("simulation" not in s for s in stripped)
    assert [s["extra_info"]["index"] for s in stripped] == ["toy/0", "toy/1"]
    assert simulation_view([r, unlabeled(1)]) == {"toy/0": {"hidden_answer": "1", "noise": "active"}}
