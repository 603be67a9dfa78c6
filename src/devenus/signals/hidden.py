"""Hidden-state pooling and the representation scores built on it (CoE).

:class:`LayerPool` keeps, per sequence and per layer, the mean of the hidden states over a token mask
(the response), accumulated layer by layer as a forward pass produces them: memory ``[B, L+1, d]``,
never ``[L+1, B, T, d]``.

CoE (Chain-of-Embedding, Wang et al. 2024a, "Latent space chain-of-embedding enables output-free LLM
self-evaluation"), on the pooled states ``h_0 .. h_L`` (``h_0`` = embeddings, ``h_L`` = the last
layer after the final norm, as in Hugging Face's ``output_hidden_states``):

- ``M_l = ||h_{l+1} - h_l|| / ||h_L - h_0||``
- ``A_l = arccos(cos(h_{l+1}, h_l)) / arccos(cos(h_L, h_0))``
- ``CoE-R = mean_l M_l - mean_l A_l``, ``CoE-C = |mean_l M_l exp(i A_l)|``

Higher = more likely correct (so an uncertainty is the negated score).
"""

from __future__ import annotations

import torch


class LayerPool:
    """Masked mean over tokens of each layer's hidden states, accumulated one layer at a time.

    ``pool = LayerPool(mask)`` with ``mask`` ``[B, T]`` (1 = pooled token); call ``pool.add(l, h)``
    with ``h`` ``[B, T, d]`` for each layer ``l`` in order (a forward hook does it); ``pool.means()``
    returns ``[B, L+1, d]`` float64 (a sequence without pooled tokens gets zeros).

    The sum over tokens is taken in at least fp32 (float64 inputs stay float64), never in the model's
    dtype: in bf16 the pooled mean of a massive-activation channel (~1e3) would be rounded to a few
    units, as large as the layer-to-layer change CoE divides by. A masked sum, not a matmul, so TF32
    cannot round it either.
    """

    def __init__(self, mask: torch.Tensor):
        self.keep = mask.bool()[..., None]
        self.count = mask.to(torch.float64).sum(dim=1).clamp(min=1.0)[:, None]
        self.sums: list[torch.Tensor | None] = []

    def add(self, layer: int, hidden: torch.Tensor) -> None:
        while len(self.sums) <= layer:
            self.sums.append(None)
        if self.sums[layer] is not None:
            raise ValueError(f"layer {layer} pooled twice in one forward")
        acc = torch.promote_types(hidden.dtype, torch.float32)
        self.sums[layer] = hidden.masked_fill(~self.keep, 0).sum(dim=1, dtype=acc).to(torch.float64)  # [B, d]

    def means(self) -> torch.Tensor:
        if not self.sums or any(s is None for s in self.sums):
            missing = [i for i, s in enumerate(self.sums) if s is None]
            raise ValueError(f"no pooled states for layers {missing or 'any'}")
        return torch.stack([s / self.count for s in self.sums], dim=1)  # type: ignore[operator]


def coe_features(pooled: torch.Tensor, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """``(M, A)``, each ``[..., L]``, from pooled states ``[..., L+1, d]`` (formulas in the module doc)."""
    h = pooled.to(torch.float64)
    if h.shape[-2] < 2:
        raise ValueError(f"CoE needs at least 2 layers of states, got {h.shape[-2]}")
    diff = h[..., 1:, :] - h[..., :-1, :]
    span = (h[..., -1, :] - h[..., 0, :]).norm(dim=-1).clamp(min=eps)
    m = diff.norm(dim=-1) / span[..., None]

    def angle(x, y):
        cos = torch.nn.functional.cosine_similarity(x, y, dim=-1, eps=eps)
        return torch.arccos(cos.clamp(-1.0, 1.0))

    total = angle(h[..., -1, :], h[..., 0, :]).clamp(min=eps)
    a = angle(h[..., 1:, :], h[..., :-1, :]) / total[..., None]
    return m, a


def coe_scores(pooled: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"coe_r": ..., "coe_c": ...}`` per sequence from pooled states ``[..., L+1, d]``."""
    m, a = coe_features(pooled)
    re = (m * torch.cos(a)).mean(dim=-1)
    im = (m * torch.sin(a)).mean(dim=-1)
    return {"coe_r": m.mean(dim=-1) - a.mean(dim=-1), "coe_c": torch.sqrt(re * re + im * im)}


class KineticsPool:
    """CoT-Kinetics energy per sequence (Bi et al. 2025; RECONSTRUCTED from methods.md), accumulated one
    layer at a time: memory a few ``[B, T, d]``, never ``[L+1, B, T, d]``.

    Per token t of the mask, the layer trajectory of unit-normalised states ``x_l = h_l / ||h_l||``
    (l = 0..L); velocities ``v_l = x_{l+1} - x_l``; kinetic ``K = mean_l ||v_l||^2``; curvature
    ``C = mean_l (1 - cos(v_l, v_{l+1}))``; energy ``E = g K + (1 - g) C`` (g = 0.8). The sequence
    score is the mean of E over the masked tokens. Call ``add(l, h)`` for l = 0, 1, ... in order.

    The ``[B, T, d]`` work is done in fp32 for a bf16/fp16/fp32 model (float64 inputs stay float64), never
    in the model's dtype; the per-token sums over layers and the mean over tokens are float64. fp32
    rather than float64 halves the buffers kept across layers (2 x 4 B x d per token).
    """

    def __init__(self, mask: torch.Tensor, g: float = 0.8, eps: float = 1e-12):
        self.mask = mask.to(torch.float64)
        self.g, self.eps = g, eps
        self.prev: torch.Tensor | None = None
        self.prev_v: torch.Tensor | None = None
        self.k_sum = self.c_sum = None
        self.n_v = self.n_c = 0
        self.next_layer = 0

    def add(self, layer: int, hidden: torch.Tensor) -> None:
        if layer != self.next_layer:
            raise ValueError(f"layers must come in order: expected {self.next_layer}, got {layer}")
        self.next_layer += 1
        # a copy (never the model's own tensor), normalised in place
        x = hidden.to(torch.promote_types(hidden.dtype, torch.float32), copy=True)
        x.div_(x.norm(dim=-1, keepdim=True).clamp_(min=self.eps))
        if self.prev is not None:
            v = x - self.prev
            k = (v * v).sum(-1).to(torch.float64)
            self.k_sum = k if self.k_sum is None else self.k_sum + k
            self.n_v += 1
            if self.prev_v is not None:
                c = 1.0 - torch.nn.functional.cosine_similarity(v, self.prev_v, dim=-1, eps=self.eps).to(torch.float64)
                self.c_sum = c if self.c_sum is None else self.c_sum + c
                self.n_c += 1
            self.prev_v = v
        self.prev = x

    def energy(self) -> torch.Tensor:
        """Mean token energy per sequence ``[B]`` (needs at least 3 layers of states)."""
        if self.n_c == 0:
            raise ValueError("CoT-Kinetics needs at least 3 layers of states")
        e = self.g * self.k_sum / self.n_v + (1.0 - self.g) * self.c_sum / self.n_c
        return (e * self.mask).sum(1) / self.mask.sum(1).clamp(min=1.0)
