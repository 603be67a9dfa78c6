"""Generators: G sampled responses per question behind one interface (:class:`Generator`).

- :mod:`.hf` Hugging Face on the CPU (the default): batched, KV cache, seeded per (question, sample).
- :mod:`.vllm` vLLM on GPUs (``generate.generator: vllm``; the optional extra ``devenus[vllm]``): all G
  samples of a question in one seeded request. Imported only when chosen: this package never imports vllm.
- :mod:`.ray_data` either of them as a Ray Data ``map_batches`` actor pool over the shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Sample:
    response_ids: list[int]  # generated tokens, EOS included when one was produced
    text: str  # decoded without special tokens
    truncated: bool  # hit max_new_tokens without EOS: no answer


class Generator(Protocol):
    def generate(self, prompts: Sequence[list[dict]], keys: Sequence[str]) -> list[list[Sample]]:
        """G samples for each prompt (chat messages); ``keys`` seed each question's samples."""
        ...


from devenus.select.generate.hf import HFGenerator, sample_seed  # noqa: E402

__all__ = ["Generator", "HFGenerator", "Sample", "sample_seed"]
