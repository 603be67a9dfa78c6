import pytest

from devenus.testbed import tasks
from devenus.testbed.tokenizer import CHAT_TEMPLATE, IM_END, build_tokenizer


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tokenizer saved beside a Qwen3 config, the way the testbed ships its model folder."""
    from transformers import Qwen3Config

    qs = tasks.generate("add", (2, 3), 200, seed=0) + tasks.generate("count", (4,), 50, seed=0)
    tok = build_tokenizer([q.text(v) + "\n" + q.solution(v) for q in qs for v in tasks.VIEWS])
    d = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(d)
    Qwen3Config(vocab_size=512, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, intermediate_size=64).save_pretrained(d)
    return tok, d


TEXTS = [
    "Compute 123 + 4567.",
    "3+4+0=7 ->7\n2+6+0=8 ->87\n\\boxed{87}",
    "two  spaces,\ttab and\n\nblank line, trailing space ",
    "unicode: ∑ é 中文 −5",
]


def test_reload_through_autotokenizer_is_identical(saved):
    # The Qwen2Tokenizer trap: transformers reloads a qwen folder as Qwen2Tokenizer whatever we saved.
    from transformers import AutoTokenizer

    tok, d = saved
    loaded = AutoTokenizer.from_pretrained(d)
    assert type(loaded).__name__ == "Qwen2Tokenizer"
    for t in TEXTS:
        assert loaded.encode(t) == tok.encode(t)
        assert loaded.decode(loaded.encode(t)) == t  # byte-level: nothing lost, spaces and newlines kept
    assert loaded.chat_template == CHAT_TEMPLATE
    assert loaded.eos_token == IM_END and loaded.pad_token_id is not None


def test_newline_is_one_token_and_digits_split(saved):
    tok, _ = saved
    assert len(tok.encode("\n")) == 1  # verl's qwen prompt builder relies on it
    assert len(tok.encode("12345")) == 5


def test_chat_template_matches_chatml(saved):
    tok, _ = saved
    s = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert s == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tok.encode(s)
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    assert tok.convert_tokens_to_ids(IM_END) in ids
