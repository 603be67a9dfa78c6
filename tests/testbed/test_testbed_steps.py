"""The testbed whose answers have steps (``TestbedConfig.answer_style="steps"``): its SFT text, its config
field and key, the default testbed left as it was, and (slow) a tiny build of the variant."""

import dataclasses
import json
import re

import pytest

from devenus.config import ConfigError, config_from_dict
from devenus.testbed import ModelConfig, SFTConfig, SplitSizes, TestbedConfig, build_testbed, tasks
from devenus.testbed.build import STEPS, question_sets
from devenus.verify import extract_answer
from test_testbed_build import TINY

COLUMN = re.compile(r"(wait )?(\d)\+(\d)\+([01])=(\d+) ->(\d+)")
CHECK = re.compile(r"check (\d+)-(\d+)=(\d+)")


def _operands(text: str) -> tuple[int, int]:
    """The operands in the order the view's text names them, the order its solution adds them (read from the
    text, not from the generator's key)."""
    a, b = map(int, re.findall(r"\d+", text))
    return a, b


def _walk(x: int, y: int, solution: str) -> dict:
    """Read a steps solution line by line, checking each against the operands; returns what it saw."""
    lines = solution.splitlines()
    assert lines[-1] == "\\boxed{" + str(x + y) + "}"
    check = CHECK.fullmatch(lines[-2])
    assert check, lines[-2]
    total, second, first = map(int, check.groups())
    assert (total, second, first) == (x + y, y, x) and total - second == first  # the self-check holds
    cols = [COLUMN.fullmatch(ln) for ln in lines[:-2]]
    assert all(cols), lines[:-2]
    xs, ys = str(x)[::-1], str(y)[::-1]
    n = max(len(xs), len(ys))
    carry, i, wrong, k = 0, 0, 0, 0
    while k < len(cols):
        wait, a, b, c, s, partial = cols[k].groups()
        a_i, b_i = (int(xs[i]) if i < len(xs) else 0), (int(ys[i]) if i < len(ys) else 0)
        assert (int(a), int(b), int(c)) == (a_i, b_i, carry), (k, lines)
        assert not wait, "a correction must follow a wrong line"
        right = a_i + b_i + carry
        if int(s) != right:  # a slip: by one, and the next line redoes this column right, after "wait "
            wrong += 1
            assert abs(int(s) - right) == 1
            k += 1
            wait, a2, b2, c2, s2, partial = cols[k].groups()
            assert wait and (int(a2), int(b2), int(c2), int(s2)) == (a_i, b_i, carry, right), lines
        carry = right // 10
        i += 1
        k += 1
        assert int(partial) == (x + y) % 10**i or i == n, (partial, lines)
    assert i == n and int(partial) == x + y  # the last running result is the sum
    return {"steps": len(lines), "wrong": wrong}


def test_steps_solutions_parse_are_right_and_self_checks_hold():
    seen = {"wrong": 0, "solutions": 0}
    for q in tasks.generate("add", (1, 2, 3, 4, 5), 400, seed=3):
        s = tasks.styled(q, "steps")
        assert (s.key, s.answer, s.views) == (q.key, q.answer, q.views)  # the same question, other solutions
        for view in tasks.VIEWS:
            x, y = _operands(s.text(view))
            got = _walk(x, y, s.solution(view))
            assert got["steps"] >= 3 and got["wrong"] <= 1
            assert extract_answer(s.solution(view)) == q.answer
            seen["wrong"] += got["wrong"]
            seen["solutions"] += 1
    assert seen["solutions"] == 800 and seen["wrong"] > 0


@pytest.mark.parametrize("bad", [
    "7+7+0=14 ->4\n9+2+1=12 ->24\n5+9+1=15 ->1524\ncheck 1524-927=598\n\\boxed{1524}",  # a false check
    "7+7+0=14 ->4\n9+2+1=13 ->34\n5+9+1=15 ->1534\ncheck 1524-927=597\n\\boxed{1524}",  # a slip never corrected
    "7+7+0=14 ->4\nwait 9+2+1=12 ->24\n5+9+1=15 ->1524\ncheck 1524-927=597\n\\boxed{1524}",  # a wait after no slip
    "7+7+0=14 ->4\n9+2+0=11 ->14\n5+9+1=15 ->1514\ncheck 1524-927=597\n\\boxed{1524}",  # a carry dropped
])
def test_the_reader_refuses_broken_solutions(bad):
    with pytest.raises(AssertionError):
        _walk(597, 927, bad)


def test_self_correction_share_is_the_constant():
    qs = [tasks.styled(q, "steps") for q in tasks.generate("add", (2, 3, 4), 3000, seed=11)]
    share = sum("\nwait " in q.solution(v) for q in qs for v in tasks.VIEWS) / (2 * len(qs))
    # 6,000 Bernoulli(0.15) draws: sd 0.0046; +-0.02 is > 4 sd
    assert abs(share - tasks.SELF_CORRECTION) < 0.02, share


def test_hand_worked_steps_solution():
    assert tasks.add_steps_solution(597, 927) == "7+7+0=14 ->4\n9+2+1=12 ->24\n5+9+1=15 ->1524\ncheck 1524-927=597\n\\boxed{1524}"
    assert tasks.add_steps_solution(597, 927, wrong_column=1, slip=1).splitlines()[1:3] == ["9+2+1=13 ->34", "wait 9+2+1=12 ->24"]
    # a slip below 0 goes up instead; in the last column the running result is the whole (wrong) sum
    assert tasks.add_steps_solution(0, 0, wrong_column=0, slip=-1).splitlines()[:2] == ["0+0+0=1 ->1", "wait 0+0+0=0 ->0"]


def test_steps_style_is_deterministic_and_leaves_other_families_alone():
    q = tasks.generate("add", (3,), 1, seed=0)[0]
    assert tasks.styled(q, "steps") == tasks.styled(q, "steps")
    assert tasks.styled(q, "line") is q
    for fam, d in (("count", (4,)), ("max", (3,))):
        other = tasks.generate(fam, d, 1, seed=0)[0]
        assert tasks.styled(other, "steps") is other
    with pytest.raises(ValueError, match="unknown answer style 'essay'"):
        tasks.styled(q, "essay")


def test_default_key_and_questions_unchanged():
    """The field exists at its default without moving the shipped weights' key or their questions."""
    from devenus.testbed import shipped

    assert TestbedConfig().key() == "55b08013686d" and TestbedConfig(answer_style="line").key() == "55b08013686d"
    assert shipped.SHIPPED_BASE_MODELS["55b08013686d"] == "28a1c599b142fd02"
    assert shipped.questions_digest(question_sets(TestbedConfig())) == shipped.build_record("55b08013686d")["questions_digest"]
    # the default SFT solutions, as the generator wrote them before the steps style existed
    assert shipped.solutions_digest(question_sets(TestbedConfig()), "line") == "ac280f2db6c0149c"
    assert STEPS.key() != TestbedConfig().key()
    assert STEPS.key() != dataclasses.replace(STEPS, answer_style="line").key()  # the style alone moves the key


def test_answer_style_loads_from_a_mapping_and_is_checked():
    cfg = config_from_dict(TestbedConfig, {"answer_style": "steps", "max_new_tokens": 144,
                                           "ood_difficulties": {"count": [3, 4, 5, 6, 7, 8], "max": [2, 3, 4, 5],
                                                                "add_long": [5]}})
    assert cfg.answer_style == "steps" and cfg.key() == STEPS.key()
    assert config_from_dict(TestbedConfig, {}).key() == TestbedConfig().key()
    with pytest.raises(ConfigError, match=r"testbed.answer_style must be one of \['line', 'steps'\], got 'essay'"):
        config_from_dict(TestbedConfig, {"answer_style": "essay"})
    with pytest.raises(ConfigError, match="testbed.answer_style"):
        TestbedConfig(answer_style="essay")
    with pytest.raises(ConfigError, match="did you mean testbed.answer_style"):
        config_from_dict(TestbedConfig, {"answer_styles": "steps"})


def test_steps_splits_hold_add_long_out_of_the_rl_pool():
    qs = question_sets(STEPS)
    assert {q.difficulty for q in qs["train"]} == {2, 3, 4}
    assert {q.family for q in qs["test_ood"]} == {"count", "max", "add_long"}
    assert {q.difficulty for q in qs["test_ood"] if q.family == "add_long"} == {5}
    assert sum(q.family == "add_long" for q in qs["sft"]) == STEPS.sizes.sft_ood_per_family
    keys = [q.key for split in qs.values() for q in split]
    assert len(keys) == len(set(keys))  # held-out questions never occur in training or SFT


def test_tokenizer_covers_steps_text_and_newline_is_one_token():
    from devenus.testbed.tokenizer import build_tokenizer

    qs = [tasks.styled(q, "steps") for q in tasks.generate("add", (1, 2, 3, 4, 5), 300, seed=4)]
    tok = build_tokenizer([q.text(v) + "\n" + q.solution(v) for q in qs for v in tasks.VIEWS], 384)
    for q in qs[:50]:
        text = q.solution("original")
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode("\n")) == 1  # PivotTrace's steps start after each newline token
    longest = max(len(tok.encode(q.solution(v))) + 1 for q in qs for v in tasks.VIEWS)
    assert longest <= STEPS.max_new_tokens, longest


def test_steps_weights_are_shipped_and_install_without_sft(tmp_path, monkeypatch):
    import shutil

    from devenus.testbed import build as build_mod
    from devenus.testbed import shipped

    assert shipped.SHIPPED_BASE_MODELS[STEPS.key()] == "26b9be880000ed57"
    rec = shipped.build_record(STEPS.key())
    assert rec["testbed_key"] == STEPS.key() and shipped.model_hash(shipped.shipped_dir(STEPS.key())) == rec["base_model"]
    assert (shipped.shipped_dir(STEPS.key()) / "model.safetensors").stat().st_size < 8 * 2**20  # small like the default's
    monkeypatch.setattr(build_mod, "_train_base", lambda *a, **k: pytest.fail("trained SFT although weights ship"))
    tb = build_testbed(STEPS, cache_dir=tmp_path / "a", log=lambda s: None)
    assert tb.report["base_model"] == {"hash": "26b9be880000ed57", "source": "shipped", "built_on": rec["built_on"]}
    assert set(tb.report["base_accuracy"]) == {"ID", "OOD/count", "OOD/max", "OOD/add_long", "OOD"}

    # weights trained on other steps solutions (tasks.styled changed, STEPS_VERSION not bumped) are refused
    d = tmp_path / "weights"
    shutil.copytree(shipped.WEIGHTS_DIR, d)
    monkeypatch.setattr(shipped, "WEIGHTS_DIR", d)
    path = d / "base-26b9be880000ed57" / "build.json"
    path.write_text(json.dumps(rec | {"solutions_digest": "0" * 16}))
    with pytest.raises(ValueError, match="STEPS_VERSION") as err:
        build_testbed(STEPS, cache_dir=tmp_path / "b", log=lambda s: None)
    assert "\n" not in str(err.value) and "0" * 16 in str(err.value) and rec["solutions_digest"] in str(err.value)


TINY_STEPS = dataclasses.replace(TINY, answer_style="steps", ood_difficulties=STEPS.ood_difficulties)


@pytest.mark.slow
def test_tiny_steps_build(tmp_path, monkeypatch):
    """A tiny steps testbed builds end to end: SFT on steps text, the OOD report per family, its own key."""
    from devenus.testbed import sft as sft_mod  # _train_base imports train_sft from it when it runs

    seen = []

    train = sft_mod.train_sft

    def spy(model, tok, pool, *a, **k):
        seen.extend(pool)
        return train(model, tok, pool, *a, **k)

    monkeypatch.setattr(sft_mod, "train_sft", spy)
    tb = build_testbed(TINY_STEPS, cache_dir=tmp_path, log=lambda s: None)
    assert tb.root.name == f"tb-{TINY_STEPS.key()}"
    rep = tb.report
    assert rep["config"]["answer_style"] == "steps" and rep["base_model"]["source"] == "sft"
    assert set(rep["base_accuracy"]) == {"ID", "OOD/count", "OOD/max", "OOD/add_long", "OOD"}
    assert rep["base_accuracy"]["OOD"]["n"] == 12
    adds = [q for q in seen if q.family in tasks.ADD_FAMILIES]
    assert adds and all("\ncheck " in q.solution(v) for q in adds for v in tasks.VIEWS)
    _, tok = tb.load_model()
    assert "check" in tok.get_vocab()  # the tokenizer was trained on the steps text
