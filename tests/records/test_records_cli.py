"""The import command."""

from __future__ import annotations

import json

import pandas as pd

from devenus.records import read_records
from devenus.records.cli import main_import


def _gsm(tmp_path):
    path = tmp_path / "gsm8k_train.jsonl"
    recs = [{"question": "What is 6 times 7?", "answer": "6*7=42\n#### 42"},
            {"question": "What is 1+1?", "answer": ""}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_import_command(tmp_path, capsys):
    src = _gsm(tmp_path)
    out = tmp_path / "out" / "d0.parquet"
    rc = main_import([str(src), "--out", str(out), "--labeled", "auto", "--source", "gsm8k",
                      "--system-prompt", "Reason step by step."])
    assert rc == 0
    text = capsys.readouterr().out
    assert "2 rows" in text and "1 labeled" in text and str(out) in text
    rows = read_records(out)
    assert [r["extra_info"]["labeled"] for r in rows] == [True, False]
    assert rows[0]["reward_model"]["ground_truth"] == "42"
    assert rows[0]["prompt"][0] == {"role": "system", "content": "Reason step by step."}
    assert list(pd.read_parquet(out).columns)[:5] == ["data_source", "prompt", "ability", "reward_model", "extra_info"]


def test_import_command_defaults_source_to_stem_and_unlabeled(tmp_path, capsys):
    src = _gsm(tmp_path)
    out = tmp_path / "u.parquet"
    assert main_import([str(src), "-o", str(out), "--unlabeled"]) == 0
    rows = read_records(out)
    assert rows[0]["extra_info"]["index"].startswith("gsm8k_train/")
    assert all(not r["extra_info"]["labeled"] for r in rows)
    assert rows[0]["simulation"]["hidden_answer"] == "42"
    assert rows[1]["simulation"] is None


def test_import_command_errors(tmp_path, capsys):
    src = _gsm(tmp_path)
    out = tmp_path / "d.parquet"
    # labeled=true (default) and a row without answer: error, nothing written
    assert main_import([str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "row 1" in err and "labeled='auto'" in err
    assert not out.exists()
    # refuses to overwrite without --force
    out.write_text("keep me")
    assert main_import([str(src), "--out", str(out), "--labeled", "auto"]) == 1
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main_import([str(src), "--out", str(out), "--labeled", "auto", "--force"]) == 0
    assert len(read_records(out)) == 2
    # unknown file
    assert main_import([str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "x.parquet")]) == 1
    assert "not found" in capsys.readouterr().err


def test_import_command_id_field_none(tmp_path):
    src = tmp_path / "d.csv"
    src.write_text("id,question,answer\n7,What is 2+2?,4\n")
    out1, out2 = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main_import([str(src), "--out", str(out1), "--source", "t"]) == 0
    assert main_import([str(src), "--out", str(out2), "--source", "t", "--id-field", "none"]) == 0
    assert read_records(out1)[0]["extra_info"]["index"] == "t/7"
    assert read_records(out2)[0]["extra_info"]["index"] != "t/7"


# ------------------------------------------------------------------------------ data head / filter / split
def _mixed(tmp_path, n=20):
    """n rows from two sources, every third one unlabeled, as a records file."""
    from devenus.records import make_row, write_records
    from devenus.records.labels import hide_labels

    rows = [make_row(data_source="t", index=f"{'a' if i % 2 else 'b'}/{i}", source="a" if i % 2 else "b",
                     question=f"What is {i} + 1?", ground_truth=str(i + 1)) for i in range(n)]
    rows = [hide_labels([r], 0.0)[0] if i % 3 == 0 else r for i, r in enumerate(rows)]
    return write_records(rows, tmp_path / "mixed.parquet")


def _data(argv):
    from devenus.cli import main

    return main(["data", *argv])


def _keys(path):
    return [r["extra_info"]["index"] for r in read_records(path)]


def test_data_head_prints_or_writes_a_version(tmp_path, capsys):
    from devenus.records.versions import verify_manifest

    src = _mixed(tmp_path)
    assert _data(["head", str(src), "-n", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("key\tsplit") and len(lines) == 4
    assert lines[1].startswith("b/0\ttrain\tunlabeled\t''\tWhat is 0 + 1?")
    assert lines[2].startswith("a/1\ttrain\tlabeled\t'2'\tWhat is 1 + 1?")
    assert _data(["head", str(src), "-n", "2", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["extra_info"]["index"] for r in rows] == ["b/0", "a/1"]
    out = tmp_path / "h.parquet"
    assert _data(["head", str(src), "-n", "4", "--out", str(out)]) == 0
    assert "the first 4 of 20 rows" in capsys.readouterr().out
    assert _keys(out) == _keys(src)[:4]
    m = verify_manifest(out, parents=[src])
    assert m.rule == "head" and m.config == {"n": 4} and m.counts["removed_rows"] == 16
    assert _data(["head", str(src), "-n", "50"]) == 0  # more than the file holds: all of it
    assert len(capsys.readouterr().out.splitlines()) == 21


def test_data_filter_by_typed_conditions(tmp_path, capsys):
    from devenus.records.versions import verify_manifest

    src = _mixed(tmp_path)
    out = tmp_path / "a_labeled.parquet"
    assert _data(["filter", str(src), "--source", "a", "--label-state", "labeled", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    want = [k for k, r in zip(_keys(src), read_records(src)) if r["extra_info"]["source"] == "a" and r["extra_info"]["labeled"]]
    assert _keys(out) == want and 0 < len(want) < 10
    m = verify_manifest(out, parents=[src])
    assert m.rule == "filter" and m.config == {"label_state": "labeled", "source": ["a"]}
    assert m.counts["removed_rows"] == 20 - len(want)

    ids = tmp_path / "ids.txt"
    ids.write_text("# two of them\nb/4\n\na/7\nnot/there\n")
    out2 = tmp_path / "picked.parquet"
    assert _data(["filter", str(src), "--ids-file", str(ids), "--out", str(out2)]) == 0
    assert _keys(out2) == ["b/4", "a/7"]  # in the file's order
    assert verify_manifest(out2).config["ids"]["count"] == 3


def test_data_filter_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    src = _mixed(tmp_path)
    out = tmp_path / "o.parquet"
    empty_ids = tmp_path / "none.txt"
    empty_ids.write_text("# nothing\n")
    for argv, says in [
        ([], "filter needs a condition"),
        (["--source", "zzz"], "no row of"),
        (["--ids-file", str(empty_ids)], "none.txt: no keys"),
        (["--ids-file", str(tmp_path / "gone.txt")], "not found"),
    ]:
        assert _data(["filter", str(src), *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1, (argv, err)
    assert _data(["filter", str(tmp_path / "missing.parquet"), "--source", "a", "--out", str(out)]) == 1
    assert "missing.parquet" in capsys.readouterr().err
    assert _data(["filter", str(src), "--source", "a", "--out", str(src), "--force"]) == 1  # never the input
    assert "is the input" in capsys.readouterr().err
    assert not list(tmp_path.glob("o.*")) and not list(tmp_path.glob(".*"))  # no output, no temporary file


def test_data_split_is_deterministic_exact_and_complete(tmp_path, capsys):
    from devenus.records.subsets import split_keys
    from devenus.records.versions import verify_manifest

    src = _mixed(tmp_path)
    d = tmp_path / "parts"
    assert _data(["split", str(src), "--fractions", "0.5,0.25,0.25", "--seed", "3", "--out-dir", str(d)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    parts = {n: _keys(d / f"{n}.parquet") for n in ("train", "val", "test")}
    assert [len(v) for v in parts.values()] == [10, 5, 5]
    assert sorted(sum(parts.values(), [])) == sorted(_keys(src))  # every row in exactly one part
    for n, keys in parts.items():
        assert keys == [k for k in _keys(src) if k in set(keys)]  # the file's order kept
        m = verify_manifest(d / f"{n}.parquet", parents=[src])
        assert m.rule == "split" and m.config == {"fractions": [0.5, 0.25, 0.25], "names": ["train", "val", "test"],
                                                  "part": n, "seed": 3}
        assert m.counts["removed_rows"] == 20 - len(keys)
    # the same seed splits the same way whatever the row order; another seed differently
    keys = _keys(src)
    assert split_keys(keys, (0.5, 0.25, 0.25), 3) == split_keys(keys[::-1], (0.5, 0.25, 0.25), 3)
    assert split_keys(keys, (0.5, 0.25, 0.25), 3) != split_keys(keys, (0.5, 0.25, 0.25), 4)
    assert {k for k, p in split_keys(keys, (0.5, 0.25, 0.25), 3).items() if p == 0} == set(parts["train"])
    # a rerun is refused without --force, and byte-identical with it
    before = (d / "val.parquet").read_bytes()
    assert _data(["split", str(src), "--fractions", "0.5,0.25,0.25", "--seed", "3", "--out-dir", str(d)]) == 1
    assert "exists (use --force" in capsys.readouterr().err
    assert _data(["split", str(src), "--fractions", "0.5,0.25,0.25", "--seed", "3", "--out-dir", str(d), "--force"]) == 0
    assert (d / "val.parquet").read_bytes() == before


def test_data_split_errors_are_one_line(tmp_path, capsys):
    src = _mixed(tmp_path, n=4)
    d = tmp_path / "p"
    for argv, says in [
        (["--fractions", "0.8,0.3"], "sum to 1"),
        (["--fractions", "0.8;0.2"], "comma-separated numbers"),
        (["--fractions", "1"], "two or more"),
        (["--fractions", "0.25,0.25,0.25,0.25"], "--names: give 4 names"),
        (["--fractions", "0.5,0.5", "--names", "a,a"], "distinct file names"),
        (["--fractions", "0.5,0.5", "--names", "a"], "1 names for 2 fractions"),
        (["--fractions", "0.9,0.05,0.05"], "give part val no row"),
    ]:
        assert _data(["split", str(src), *argv, "--out-dir", str(d)]) == 1
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1, (argv, err)
    assert not d.exists()
