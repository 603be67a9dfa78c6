"""A warning for the classic collapse of confidence rewards: responses shrink while confidence rises."""

from __future__ import annotations

from typing import Any

import numpy as np


class CollapseMonitor:
    """Per training step it receives the mean response length and the mean confidence score of the scored
    rows. The first ``baseline_steps`` steps set the baseline length. Afterwards ``collapse_warning`` is 1
    when the mean length is below ``length_ratio`` x the baseline AND the confidence rose since the
    previous step; else 0. A diagnostic only: it never changes rewards. Its state is checkpointed."""

    def __init__(self, baseline_steps: int = 3, length_ratio: float = 0.5):
        self.baseline_steps = int(baseline_steps)
        self.length_ratio = float(length_ratio)
        self.lengths: list[float] = []  # the baseline steps' mean lengths
        self.last_confidence: float | None = None

    def update(self, mean_length: float, mean_confidence: float) -> dict[str, float]:
        rising = self.last_confidence is not None and mean_confidence > self.last_confidence
        self.last_confidence = float(mean_confidence)
        if len(self.lengths) < self.baseline_steps:
            self.lengths.append(float(mean_length))
            return {"collapse_warning": 0.0}
        base = float(np.mean(self.lengths))
        return {"length_vs_baseline": mean_length / base if base > 0 else float("nan"),
                "collapse_warning": float(bool(base > 0 and mean_length < self.length_ratio * base and rising))}

    def state_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "last_confidence": self.last_confidence}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lengths = [float(x) for x in state.get("lengths", [])]
        lc = state.get("last_confidence")
        self.last_confidence = None if lc is None else float(lc)
