"""Sampling from a HF causal LM with the chat template verl applies, through :mod:`devenus.generate`."""

from __future__ import annotations

from typing import Sequence

from devenus.generate import Sample, Sampling


def chat_prompt(tokenizer, question: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )


def sample(
    model,
    tokenizer,
    questions: Sequence[str],
    n: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 96,
    batch_size: int = 256,
    seed: int = 0,
) -> list[list[Sample]]:
    """``n`` samples per question; ``temperature=0`` means greedy. Sample ``j`` of a question is drawn from
    ``(seed, the question's text, j)``: the same question gets the same samples in any call."""
    from devenus.generate.hf import HFBackend

    backend = HFBackend(model=(model, tokenizer), batch_size=batch_size)
    return backend.generate([[{"role": "user", "content": q}] for q in questions], list(questions), n,
                            Sampling(temperature, 1.0, max_new_tokens, seed))
