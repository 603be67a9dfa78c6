"""The generator interface: G sampled responses per question."""

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
