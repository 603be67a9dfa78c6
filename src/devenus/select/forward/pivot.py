"""``pivot_trace``: the number of pivots (RECONSTRUCTED). Q and K of ~4 layers at 50-87% depth are recomputed
from the captured inputs of their attention modules and reduced in query chunks to the far-back attention
mass per position (:mod:`devenus.signals.attention`); no attention map. Needs each response's step starts."""

from __future__ import annotations

import sys
from typing import Sequence

import numpy as np
import torch

from devenus.select.forward import ForwardUnit, host
from devenus.signals.attention import far_attention_mass, pivot_count


def pivot_layer_ids(n_layers: int, count: int = 4, lo: float = 0.5, hi: float = 0.87) -> list[int]:
    """~``count`` layers spread over 50-87% of the depth (distinct ids, 0-based)."""
    return sorted({min(n_layers - 1, int(round(f * (n_layers - 1)))) for f in np.linspace(lo, hi, count)})


def far_mass(attn, args, kwargs, key_mask, window: int, chunk: int) -> torch.Tensor:
    """Recompute Q, K of a Qwen-style attention module from its inputs (q/k projections, q/k norms,
    rotary embedding) and reduce them to the far-back attention mass per position."""
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    cos, sin = kwargs["position_embeddings"]
    shape = (*hidden.shape[:-1], -1, attn.head_dim)
    q = attn.q_proj(hidden).view(shape)
    k = attn.k_proj(hidden).view(shape)
    if hasattr(attn, "q_norm"):
        q, k = attn.q_norm(q), attn.k_norm(k)
    rotary = sys.modules[type(attn).__module__].apply_rotary_pos_emb
    q, k = rotary(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    return far_attention_mass(q, k, key_mask, window=window, chunk=chunk, scaling=getattr(attn, "scaling", None))


class PivotTrace(ForwardUnit):
    names = ("pivot_trace",)

    def __init__(self, want: Sequence[str], base, head, options):
        super().__init__(want, base, head, options)
        if options.step_starts is None:
            raise ValueError("pivot_trace needs step_starts (the first token of each step of each response)")
        self.layers = (list(options.pivot_layers) if options.pivot_layers is not None
                       else pivot_layer_ids(len(base.layers)))

    def hooks(self, batch):
        o, self.masses = self.options, []
        return [self.base.layers[li].self_attn.register_forward_pre_hook(
            lambda mod, args, kwargs: self.masses.append(far_mass(mod, args, kwargs, batch.attn, o.pivot_window,
                                                                  o.pivot_chunk)), with_kwargs=True)
                for li in self.layers]

    def collect(self, batch, last, out):
        mass = host(torch.stack(self.masses).float().mean(0))  # layers averaged (heads already are)
        for b, i in enumerate(batch.idx):
            m = mass[b, batch.plen[b]: batch.plen[b] + batch.rlen[b]].numpy()
            out["pivot_trace"][i] = float(pivot_count(m, self.options.step_starts[i]))
