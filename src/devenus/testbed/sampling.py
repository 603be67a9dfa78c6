"""Batched sampling from a HF causal LM with the chat template verl applies (KV cache, left padding)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


def chat_prompt(tokenizer, question: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )


@dataclass(frozen=True)
class Completion:
    text: str
    truncated: bool  # hit max_new_tokens without EOS: counts as no answer


def sample(
    model,
    tokenizer,
    questions: Sequence[str],
    n: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 96,
    batch_size: int = 256,
    seed: int = 0,
) -> list[list[Completion]]:
    """``n`` completions per question; ``temperature=0`` means greedy. Deterministic given ``seed``."""
    import torch

    prompts = [chat_prompt(tokenizer, q) for q in questions for _ in range(n)]
    eos = tokenizer.eos_token_id
    out: list[Completion] = []
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    model.eval()
    try:
        gen = torch.Generator().manual_seed(seed)
        for start in range(0, len(prompts), batch_size):
            chunk = prompts[start : start + batch_size]
            enc = tokenizer(chunk, return_tensors="pt", padding=True)
            # HF sampling draws from the global RNG; reseed it per chunk from our generator.
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            with torch.no_grad():
                ids = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=temperature > 0,
                    temperature=temperature if temperature > 0 else None,
                    top_p=None,
                    top_k=None,
                    eos_token_id=eos,
                    pad_token_id=tokenizer.pad_token_id,
                )
            new = ids[:, enc["input_ids"].shape[1] :]
            for row in new.tolist():
                done = eos in row
                row = row[: row.index(eos)] if done else row
                out.append(Completion(tokenizer.decode(row, skip_special_tokens=True), truncated=not done))
    finally:
        tokenizer.padding_side = old_side
    return [out[i * n : (i + 1) * n] for i in range(len(questions))]
