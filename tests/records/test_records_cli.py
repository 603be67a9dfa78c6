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
