"""The second embedded model's resolver: a missing extra is one line naming it, a converted folder is
reused without the wheel, and the chat-phrased pool asks for a boxed answer. None of these needs the
wheel; the runs on the real model are in tests/select/test_smollm2_e2e.py (extended)."""

import importlib.util
import json

import pytest

from devenus import smollm2
from devenus.cli import main
from devenus.sources import model_names, pool_names, resolve_model


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
        # the question itself stays bare, as the import keeps it (the records contract)
        assert msg["content"] == r["extra_info"]["question"] + " Put the final answer in \\boxed{}."
        assert r["simulation"]["hidden_answer"]


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


def test_chat_split_phrases_testbed_rows_and_hides_labels_on_request(base_testbed, tmp_path):
    from devenus.records import read_records

    labeled = read_records(smollm2.chat_split(base_testbed, "train", tmp_path / "l.parquet", 5, difficulty=2))
    assert len(labeled) == 5 and all(r["extra_info"]["difficulty"] == 2 for r in labeled)
    for r in labeled:
        assert r["prompt"] == smollm2.chat_format().messages(r["extra_info"]["question"]) and len(r["prompt"]) == 3
        assert r["extra_info"]["labeled"] and r["reward_model"]["ground_truth"]
    unlabeled = read_records(smollm2.chat_split(base_testbed, "train", tmp_path / "u.parquet", 5, difficulty=2,
                                                labeled=False))
    assert [r["extra_info"]["index"] for r in unlabeled] == [r["extra_info"]["index"] for r in labeled]
    for u, l in zip(unlabeled, labeled):
        assert not u["extra_info"]["labeled"] and u["reward_model"]["ground_truth"] == ""
        assert u["simulation"]["hidden_answer"] == l["reward_model"]["ground_truth"]
        assert u["prompt"] == l["prompt"]
    with pytest.raises(ValueError, match="fewer than"):
        smollm2.chat_split(base_testbed, "test_id", tmp_path / "x.parquet", 5, difficulty=2)


def test_run_config_points_the_testbed_run_at_the_model_and_its_data(base_testbed, tmp_path):
    from devenus.runs.testbed import RunConfig, overrides

    def value(ov, key):
        return [o.split("=", 1)[1] for o in ov if o.split("=", 1)[0] == key][-1]

    cfg = smollm2.run_config("ttrl", tmp_path / "t.parquet", tmp_path / "v.parquet", model=tmp_path / "m")
    ov = overrides(base_testbed, tmp_path, cfg)
    assert value(ov, "actor_rollout_ref.model.path") == str(tmp_path / "m")
    assert value(ov, "data.train_files") == str(tmp_path / "t.parquet")
    assert value(ov, "data.val_files") == f"[{tmp_path / 'v.parquet'}]"
    assert value(ov, "data.max_prompt_length") == str(smollm2.PROMPT_LENGTH)
    assert value(ov, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == "4"
    assert value(ov, "devenus.method") == "ttrl" and value(ov, "data.train_batch_size") == "4"
    assert value(ov, "data.max_response_length") == str(smollm2.RESPONSE_LENGTH)
    longer = smollm2.run_config("ttrl", tmp_path / "t.parquet", tmp_path / "v.parquet", model=tmp_path / "m",
                                max_response_length=256)
    assert value(overrides(base_testbed, tmp_path, longer), "data.max_response_length") == "256"
    # the testbed's own run keeps its model, test splits, prompt length and whole-step micro-batches
    ov = overrides(base_testbed, tmp_path, RunConfig())
    assert value(ov, "actor_rollout_ref.model.path") == str(base_testbed.model_dir)
    assert value(ov, "data.val_files") == f"[{base_testbed.split('test_id')},{base_testbed.split('test_ood')}]"
    assert value(ov, "data.max_prompt_length") == "64"
    assert value(ov, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == "64"
