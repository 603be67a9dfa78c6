"""A small end-to-end build, and the claims the default testbed makes about its base model."""

import dataclasses

import pytest

from devenus.records import read_records
from devenus.testbed import ModelConfig, SFTConfig, SplitSizes, TestbedConfig, build_testbed
from devenus.testbed import build as build_mod

TINY = TestbedConfig(
    seed=5,
    model=ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                      intermediate_size=64),
    sft=SFTConfig(max_steps=12, batch_size=8, warmup_steps=2, min_steps=6, eval_every=6, hi=1.1),
    sizes=SplitSizes(train=40, dev_id=8, test_id=8, test_ood_per_family=4, sft_id=60, sft_ood_per_family=10),
    max_new_tokens=24,
    report_samples=2,
)


@pytest.mark.slow
def test_small_build_end_to_end_and_cache(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tb = build_testbed(TINY, cache_dir=tmp_path, log=lambda s: None)
    train = read_records(tb.split("train"))  # validates the record contract
    assert len(train) == 40 and len(read_records(tb.split("test_ood"))) == 8
    para = read_records(tb.split("train_paraphrase"))
    assert [r["extra_info"]["pair_key"] for r in para] == [r["extra_info"]["index"] for r in train]
    assert [r["reward_model"]["ground_truth"] for r in para] == [r["reward_model"]["ground_truth"] for r in train]
    held_out = {r["extra_info"]["question"] for s in ("dev_id", "test_id", "test_ood") for r in read_records(tb.split(s))}
    assert not held_out & {r["extra_info"]["question"] for r in train}
    assert type(AutoTokenizer.from_pretrained(tb.model_dir)).__name__ == "Qwen2Tokenizer"
    model = AutoModelForCausalLM.from_pretrained(tb.model_dir)
    assert model.config.model_type == "qwen3" and model.config.tie_word_embeddings
    rep = tb.report
    assert rep["sft"]["chosen_step"] in (6, 12)
    assert rep["base_model"]["source"] == "sft"  # a key without shipped weights trains its base model
    assert set(rep["base_accuracy"]) == {"ID", "OOD/count", "OOD/max", "OOD"}
    assert not list(tmp_path.glob("testbed/.build-*"))  # no half-built folder left behind

    # Cached: a second call must not build again.
    monkeypatch.setattr(build_mod, "_build_into", lambda *a, **k: pytest.fail("rebuilt a cached testbed"))
    assert build_testbed(TINY, cache_dir=tmp_path).root == tb.root


def test_failed_build_leaves_nothing(tmp_path, monkeypatch):
    def boom(out, cfg, log, train=True):
        (out / "partial").write_text("x")
        raise RuntimeError("crash mid-build")

    monkeypatch.setattr(build_mod, "_build_into", boom)
    with pytest.raises(RuntimeError, match="crash mid-build"):
        build_testbed(TINY, cache_dir=tmp_path)
    assert [p.name for p in (tmp_path / "testbed").iterdir() if not p.name.startswith(".lock")] == []


def test_cache_key_tracks_config():
    assert TINY.key() == dataclasses.replace(TINY).key()
    assert TINY.key() != dataclasses.replace(TINY, seed=6).key()


@pytest.mark.slow
def test_default_base_model_leaves_room_for_rl(base_testbed):
    acc = base_testbed.report["base_accuracy"]
    assert 0.15 <= acc["ID"]["sampled"]["mean"] <= 0.5, acc["ID"]
    assert acc["ID"]["n"] == 256


@pytest.mark.slow
def test_inactive_noise_is_never_produced_by_the_base_model(base_testbed):
    """The regime's claim, checked against the real base model: no sampled answer is negative."""
    from devenus.testbed.noise import sample_wrong_answers

    model, tok = base_testbed.load_model()
    rows = read_records(base_testbed.split("train"))[:64]
    wrong = sample_wrong_answers(model, tok, rows, n_samples=4, seed=0)
    answers = [a for ws in wrong.values() for a in ws]
    assert answers, "the base model should make some mistakes"
    assert not any(a.startswith("-") for a in answers)
