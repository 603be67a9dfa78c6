"""Forward signals as registered units: each computes one or more raw per-response scores from the ONE
teacher-forced forward :func:`devenus.select.score.forward_signals` runs per batch.

A unit (:class:`ForwardUnit`) installs the hooks it needs on the decoder for a batch (:meth:`~ForwardUnit.hooks`)
and, after the forward, writes its scores for the batch's rows (:meth:`~ForwardUnit.collect`). Units are
registered by signal name in :data:`devenus.select.signal_table.UNITS` (the ``unit`` of the signal's row, a
lazy ``module:Class``), so listing the signals imports no torch. Adding one: a module here with the class,
and its row in the signal table (docs/adding_a_signal.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import torch


@dataclass(frozen=True)
class ForwardOptions:
    """What the caller of :func:`~devenus.select.score.forward_signals` set for the units."""

    token_chunk: int = 512
    vocab_chunk: int = 8192
    temperature: float = 1.0
    step_starts: Sequence[Sequence[int]] | None = None
    pivot_window: int = 256
    pivot_chunk: int = 256
    pivot_layers: Sequence[int] | None = None


@dataclass
class ForwardBatch:
    """One forward's rows: their indices into the call's responses, the right-padded ``ids`` and
    ``attn`` [B, T], the response-token mask ``resp`` [B, T] (on the model's device), and each row's
    prompt and response lengths."""

    idx: list[int]
    ids: torch.Tensor
    attn: torch.Tensor
    resp: torch.Tensor
    plen: list[int]
    rlen: list[int]


class ForwardUnit:
    """Computes ``want`` (a subset of :attr:`names`) in one pass. ``base``: the decoder without its head
    (``.embed_tokens``, ``.layers``, ``.norm``), ``head``: the output embedding."""

    #: the signals it computes (several when they share the work, e.g. entropy and self-certainty)
    names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, want: Sequence[str], base: Any, head: Any, options: ForwardOptions):
        self.want, self.base, self.head, self.options = list(want), base, head, options

    def hooks(self, batch: ForwardBatch) -> list:
        """Install the hooks this batch's forward feeds (their handles; removed after the forward)."""
        return []

    def collect(self, batch: ForwardBatch, last: torch.Tensor, out: dict[str, np.ndarray]) -> None:
        """Write ``out[name][batch.idx]`` for each wanted name; ``last``: the final hidden states [B, T, d]."""
        raise NotImplementedError


def host(x: torch.Tensor) -> torch.Tensor:
    """``x`` on the CPU in float64 (numpy has no bfloat16, and results leave the device once)."""
    return x.detach().to("cpu", torch.float64)


def hidden_state_hooks(base: Any, take) -> list:
    """Forward hooks calling ``take(layer, hidden)`` for each hidden state in HF's ``hidden_states`` order
    (the embeddings, every layer's output but the last, then the final norm's)."""
    mods = [base.embed_tokens, *list(base.layers)[:-1], base.norm]
    return [mod.register_forward_hook(lambda _m, _inp, output, li=li: take(li, output[0] if isinstance(output, tuple)
                                                                         else output))
            for li, mod in enumerate(mods)]
