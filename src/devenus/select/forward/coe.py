"""``coe_r`` / ``coe_c``: the Chain-of-Embedding scores of the per-layer hidden states, each pooled over the
response tokens as it streams past (``[L, T, d]`` never exists)."""

from __future__ import annotations

from devenus.select.forward import ForwardUnit, hidden_state_hooks, host
from devenus.signals.hidden import LayerPool, coe_scores


class CoE(ForwardUnit):
    names = ("coe_r", "coe_c")

    def hooks(self, batch):
        self.pool = LayerPool(batch.resp)
        return hidden_state_hooks(self.base, self.pool.add)

    def collect(self, batch, last, out):
        c = coe_scores(self.pool.means())
        for name in self.want:
            out[name][batch.idx] = host(c[name]).numpy()
