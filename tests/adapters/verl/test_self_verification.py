"""Self-verification's batch building on the testbed tokenizer (no Ray; the actor pass runs in
test_unsupervised_e2e)."""

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from devenus.adapters.verl.self_verification import _pack, question_text, verification_prompts  # noqa: E402
from devenus.online.supervise.unsupervised import DEFAULT_VERIFICATION_TEMPLATE  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(base_testbed):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_testbed.model_dir)


def test_prompts_carry_question_and_answer_through_the_chat_template(tokenizer):
    ids = verification_prompts(tokenizer, ["What is 2 + 3?"], ["5"], DEFAULT_VERIFICATION_TEMPLATE)
    text = tokenizer.decode(ids[0])
    assert "What is 2 + 3?" in text and "Proposed answer: 5" in text
    want = tokenizer.apply_chat_template([{"role": "user", "content": DEFAULT_VERIFICATION_TEMPLATE.format(
        question="What is 2 + 3?", answer="5")}], add_generation_prompt=True, tokenize=False)
    assert text == want  # exactly the policy's own template, generation prompt included


def test_pack_left_pads_prompts_right_pads_replies(tokenizer):
    d = _pack(tokenizer, [[5, 6, 7], [8]], [[1], [2, 3]])
    b = d.batch
    assert b["prompts"].tolist()[1][:2] == [tokenizer.pad_token_id] * 2 and b["prompts"][1, 2] == 8
    assert b["response_mask"].tolist() == [[1, 0], [1, 1]]
    assert b["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert b["position_ids"].tolist() == [[0, 1, 2, 3, 3], [0, 0, 0, 1, 2]]
    assert torch.equal(b["input_ids"], torch.cat([b["prompts"], b["responses"]], dim=1))
    assert d.meta_info["temperature"] == 1.0


def test_question_comes_from_the_raw_prompt_then_extra_info():
    nt = {"raw_prompt": np.array([[{"role": "system", "content": "s"}, {"role": "user", "content": "Q?"}]], dtype=object)}
    assert question_text(nt, 0) == "Q?"
    assert question_text({"extra_info": np.array([{"question": "Q2"}], dtype=object)}, 0) == "Q2"
    with pytest.raises(ValueError, match="row 0"):
        question_text({"extra_info": np.array([{}], dtype=object)}, 0)
