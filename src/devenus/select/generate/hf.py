"""Sampling with a Hugging Face causal LM on the CPU: batched ``generate`` with the KV cache, each
(question, sample) drawn from its own random stream.

HF's own sampler draws every row of a batch from one global generator, so a question's samples would
depend on which other questions share its batch. Here a logits processor samples each row by the
Gumbel-max trick (``argmax(z / T + Gumbel)`` is an exact draw from ``softmax(z / T)``) with noise from
a generator seeded by ``sha256(seed, question key, sample index)``, and hands ``generate`` a one-hot
score, so greedy decoding emits exactly the drawn token. A question's samples then depend on its key
and the seed only (up to floating-point differences from padding within a batch; the shards fix the
batches, so reruns are bit-for-bit identical).
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import torch

from devenus.select.generate.base import Sample


def sample_seed(seed: int, key: str, j: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\0{key}\0{j}".encode()).digest()[:8], "little") & ((1 << 63) - 1)


def nucleus(z: torch.Tensor, top_p: float) -> torch.Tensor:
    """Logits ``z`` [B, V] with every token outside the top-p nucleus set to -inf: the smallest set of
    most probable tokens whose probability reaches ``top_p`` (the most probable token always stays)."""
    p, order = torch.softmax(z, dim=-1).sort(dim=-1, descending=True)
    before = p.cumsum(dim=-1) - p  # mass of the more probable tokens
    drop = torch.zeros_like(z, dtype=torch.bool).scatter(-1, order, before >= top_p)
    return z.masked_fill(drop, -float("inf"))


class _RowSampler:
    """A ``LogitsProcessor``: one Gumbel-max draw per row from the row's own generator."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float = 1.0):
        self.gens = [torch.Generator().manual_seed(s) for s in seeds]
        self.temperature = float(temperature)
        self.top_p = float(top_p)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        b, v = scores.shape
        # the noise is drawn on the CPU (per-row CPU generators) and moved: a sample is the same on any device
        u = torch.stack([torch.rand(v, generator=g, dtype=torch.float64) for g in self.gens[:b]]).to(scores.device)
        gumbel = -torch.log(-torch.log(u.clamp(min=1e-300)))
        z = scores.double() / self.temperature
        if self.top_p < 1.0:
            z = nucleus(z, self.top_p)
        pick = (z + gumbel).argmax(dim=-1)
        out = torch.full_like(scores, -float("inf"))
        out[torch.arange(b, device=scores.device), pick] = 0.0
        return out


class HFGenerator:
    """``HFGenerator(model, tokenizer, samples=8, temperature=1.0, top_p=1.0, max_new_tokens=96, batch_size=64, seed=0)``."""

    def __init__(self, model, tokenizer, *, samples: int = 8, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 96, batch_size: int = 64, seed: int = 0):
        self.model, self.tok = model, tokenizer
        self.samples, self.temperature, self.top_p = samples, temperature, top_p
        self.max_new_tokens, self.batch_size, self.seed = max_new_tokens, batch_size, seed

    def prompt_text(self, messages: list[dict]) -> str:
        return self.tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    def generate(self, prompts: Sequence[list[dict]], keys: Sequence[str]) -> list[list[Sample]]:
        from transformers import LogitsProcessorList

        jobs = [(qi, j) for qi in range(len(prompts)) for j in range(self.samples)]
        texts = [self.prompt_text(p) for p in prompts]
        eos = self.tok.eos_token_id
        out: list[list[Sample | None]] = [[None] * self.samples for _ in prompts]
        old_side = self.tok.padding_side
        self.tok.padding_side = "left"
        self.model.eval()
        device = next(self.model.parameters()).device
        try:
            for start in range(0, len(jobs), self.batch_size):
                chunk = jobs[start:start + self.batch_size]
                enc = self.tok([texts[qi] for qi, _ in chunk], return_tensors="pt", padding=True).to(device)
                sampler = _RowSampler([sample_seed(self.seed, keys[qi], j) for qi, j in chunk], self.temperature,
                                      self.top_p)
                with torch.no_grad():
                    ids = self.model.generate(
                        **enc, max_new_tokens=self.max_new_tokens, do_sample=False,
                        logits_processor=LogitsProcessorList([sampler]),
                        temperature=None, top_p=None, top_k=None, repetition_penalty=None,
                        eos_token_id=eos, pad_token_id=self.tok.pad_token_id,
                    )
                new = ids[:, enc["input_ids"].shape[1]:].tolist()
                for (qi, j), row in zip(chunk, new):
                    done = eos in row
                    row = row[: row.index(eos) + 1] if done else row
                    text = self.tok.decode(row, skip_special_tokens=True)
                    out[qi][j] = Sample(row, text, truncated=not done)
        finally:
            self.tok.padding_side = old_side
        return out  # type: ignore[return-value]
