"""The one seeded per-row sampler: each row of a batch draws from its own generator.

HF's own sampler draws every row of a batch from one global generator, so a row's sample would depend on
which rows share its batch. Here each row adds Gumbel noise from its own ``torch.Generator`` (seeded by
:func:`devenus.generate.row_seed`) to its warped scores; the argmax is an exact draw from the
temperature/top-k/top-p distribution (the Gumbel-max trick). One draw of ``V`` uniforms per row per
decoding step, on the CPU, in float64: a row's samples depend on its seed (and its logits) only, on any
device.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch


class RowSampler:
    """Per-row Gumbel-max sampling. ``perturb(scores, rows)`` gives warped scores plus each row's next draw
    (their argmax is the sample); as a ``logits_processor`` of a greedy ``model.generate`` it does the same.
    Warpers follow transformers' order and semantics: temperature, then top-k, then top-p (keeping at
    least one token)."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float = 1.0, top_k: int = -1) -> None:
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)

    def warp(self, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.double()
        if self.temperature != 1.0:
            scores = scores / self.temperature
        if 0 < self.top_k < scores.shape[-1]:
            kth = torch.topk(scores, self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
            cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            drop = cum <= (1 - self.top_p)
            drop[..., -1:] = False
            scores = scores.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
        return scores

    def perturb(self, scores: torch.Tensor, rows: Optional[Sequence[int]] = None) -> torch.Tensor:
        """Warped scores [B, V] (float64) plus each row's next Gumbel draw; ``rows``: which generator each row
        of ``scores`` belongs to (default: the first B, in order)."""
        scores = self.warp(scores)
        vocab = scores.shape[-1]
        gens = self.generators[: scores.shape[0]] if rows is None else [self.generators[r] for r in rows]
        u = torch.stack([torch.rand(vocab, generator=g, dtype=torch.float64) for g in gens])
        gumbel = -torch.log(-torch.log(u.clamp_(min=torch.finfo(torch.float64).tiny)))
        return scores + gumbel.to(scores.device)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        # a one-hot score: greedy decoding then emits exactly the drawn token (no float32 rounding of the draw)
        pick = self.perturb(scores).argmax(dim=-1)
        out = torch.full_like(scores, -float("inf"))
        out[torch.arange(scores.shape[0], device=scores.device), pick] = 0.0
        return out
