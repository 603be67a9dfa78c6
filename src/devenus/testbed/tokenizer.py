"""A real byte-level BPE tokenizer for the testbed, built the way transformers loads Qwen models.

Why this shape: transformers 5 reloads any folder whose config says ``qwen2``/``qwen3`` as
``Qwen2Tokenizer`` (ignoring ``tokenizer_class``), and verl loads it that way too. A tokenizer built
with a different pre-tokenizer would silently change on reload (a character-level one loses spaces and
newlines). So we train the BPE merges with exactly Qwen2Tokenizer's normaliser, pre-tokeniser and
decoder, and save it through ``Qwen2Tokenizer`` itself: the way verl loads it is the way it was built.
The Qwen regex splits digits one per token, which is what the arithmetic tasks want.
"""

from __future__ import annotations

from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import BPE

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)

# ChatML, as Qwen uses it; no system prompt is injected so the prompt stays short.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def _qwen2_pretokenize_regex() -> str:
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    return PRETOKENIZE_REGEX


def train_bpe(corpus: Iterable[str], vocab_size: int = 384) -> Tokenizer:
    """Train byte-level BPE merges on ``corpus`` with Qwen2Tokenizer's exact pipeline."""
    tok = Tokenizer(BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_qwen2_pretokenize_regex()), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 384):
    """A ``Qwen2Tokenizer`` (transformers) holding merges trained on ``corpus``, with a ChatML template."""
    import json

    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    raw = train_bpe(corpus, vocab_size)
    model = json.loads(raw.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        eos_token=IM_END,
        pad_token=PAD,
        extra_special_tokens=[IM_START],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok
