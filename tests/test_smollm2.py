"""The second embedded model's resolver: a missing extra is one line naming it, a converted folder is
reused without the wheel, and the chat-phrased pool asks for a boxed answer. None of these needs the
wheel; the runs on the real model are in tests/select/test_smollm2_e2e.py (extended)."""

import importlib.util
import json

import pytest

from devenus import smollm2
from devenus.cli import main
from devenus.select.sources import model_names, pool_names, resolve_model


@pytest.fixture
def no_wheel(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == smollm2.PACKAGE else real(name, *a))


def test_registered_names():
    assert "smollm2" in model_names() and "smollm2-pool" in pool_names()


def test_missing_extra_is_one_line_naming_it(no_wheel, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEVENUS_CACHE", str(tmp_path))
    with pytest.raises(smollm2.MissingExtra, match=r"smollm2 extra: pip install -e '\.\[smollm2\]'"):
        resolve_model("smollm2")
    assert main(["model", "path", "smollm2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: model 'smollm2' needs the smollm2 extra") and "\n" not in err
    assert not (tmp_path / "models").exists()


def test_a_converted_folder_is_reused_without_the_wheel(no_wheel, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEVENUS_CACHE", str(tmp_path))
    done = tmp_path / "models" / smollm2.FOLDER
    done.mkdir(parents=True)
    (done / "conversion.json").write_text(json.dumps({"seconds": 1}))
    assert main(["model", "path", "smollm2"]) == 0
    assert capsys.readouterr().out.strip() == str(done)


def test_a_half_written_folder_is_not_reused(no_wheel, tmp_path, monkeypatch):
    monkeypatch.setenv("DEVENUS_CACHE", str(tmp_path))
    half = tmp_path / "models" / smollm2.FOLDER
    half.mkdir(parents=True)
    (half / "config.json").write_text("{}")  # no conversion.json: the conversion never finished
    with pytest.raises(smollm2.MissingExtra):
        smollm2.model_dir()


def test_chat_pool_asks_for_a_boxed_answer():
    rows = smollm2.chat_pool_rows(size=6)
    assert len(rows) == 6
    for r in rows:
        *shot, msg = r["prompt"]
        assert [m["role"] for m in shot] == ["user", "assistant"] and shot[1]["content"].endswith("\\boxed{7}.")
        assert msg["content"].endswith("Put the final answer in \\boxed{}.") and msg["content"].startswith("Compute ")
        assert r["extra_info"]["question"] == msg["content"] and r["simulation"]["hidden_answer"]


def test_model_list_names_both(capsys):
    assert main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("smollm2: ") and "\ntestbed: " in out


def test_eval_resolves_the_name(no_wheel, tmp_path, monkeypatch):
    from devenus.evaluate.cli import resolve_model as eval_resolve

    monkeypatch.setenv("DEVENUS_CACHE", str(tmp_path))
    done = tmp_path / "models" / smollm2.FOLDER
    done.mkdir(parents=True)
    (done / "conversion.json").write_text("{}")
    assert eval_resolve("smollm2", None) == (str(done), "embedded model 'smollm2'")
