"""``cot_kinetics``: the mean CoT-Kinetics energy over response tokens (RECONSTRUCTED), from the per-layer
hidden states as they stream past."""

from __future__ import annotations

from devenus.select.forward import ForwardUnit, hidden_state_hooks, host
from devenus.signals.hidden import KineticsPool


class Kinetics(ForwardUnit):
    names = ("cot_kinetics",)

    def hooks(self, batch):
        self.kinetics = KineticsPool(batch.resp)
        return hidden_state_hooks(self.base, self.kinetics.add)

    def collect(self, batch, last, out):
        out["cot_kinetics"][batch.idx] = host(self.kinetics.energy()).numpy()
