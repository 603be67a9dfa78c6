"""TraPO v2 (this framework's extension, persistent): promotion of unlabeled samples is an offline
transition (``devenus transition --rule promote``), never an edit during training.

Online, only labeled groups train (the labeled-only warm-up lasts the whole round); every visit of an
unlabeled sample is a generation-only observation (its group is dropped from the update, S_b): the
round's probes of that sample. It *proposes* a promotion (an evidence row of kind ``proposal``) when,
at this probe,

- the majority pass rate >= ``min_pass_rate`` (0.75),
- the least-squares slope of the majority pass rate over the last ``slope_probes`` probes > ``min_slope``
  (0.02, strict), and
- the majority answer is equivalent to the unique mode of its history, over >= ``min_probes`` (3) probes.

Besides the sampler's visits, probe passes (``+devenus.probe.every_k_steps=K``: generation-only passes
over the unlabeled pool or a seeded sample of it) reach the method as visits; their evidence rows are
``kind=probe`` (docs/lifecycle.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from devenus.online.config import MethodConfig, option
from devenus.online.refine.common import EPS, Histories, RefineMethod, Visit, equivalent, ls_slope, observe_groups, unique_mode
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch

RULE = "promote"


@dataclass
class TraPO2Config(MethodConfig):
    min_pass_rate: float = option(0.75, "majority pass rate at this probe must be >= this", ge=0.0, le=1.0)
    min_slope: float = option(0.02, "slope of the majority pass rate over the last slope_probes probes must be > this")
    slope_probes: int = option(3, "probes the slope is fitted over", ge=2)
    min_probes: int = option(3, "probes of history the mode is taken over (fewer: no proposal)", ge=1)
    window: int = option(8, "probes kept per sample; bounds memory (>= slope_probes and min_probes)", ge=2)

    def check(self) -> None:
        from devenus.online.config import ConfigError

        if self.window < max(self.slope_probes, self.min_probes):
            raise ConfigError(f"devenus.method_config.window={self.window} must be >= slope_probes "
                              f"({self.slope_probes}) and min_probes ({self.min_probes})")


def promotion(history: list[Visit], config: TraPO2Config) -> tuple[str | None, float, str | None]:
    """(the answer to promote or None, slope over the last ``slope_probes``, mode), the current probe last."""
    cur = history[-1]
    slope = ls_slope([v.majority_pass_rate for v in history[-config.slope_probes:]])
    mode = unique_mode([v.majority for v in history])
    ok = (cur.majority is not None and len(history) >= config.min_probes
          and len(history) >= config.slope_probes
          and cur.majority_pass_rate >= config.min_pass_rate - EPS
          and slope > config.min_slope + EPS
          and equivalent(mode, cur.majority))
    return (cur.majority if ok else None), slope, mode


@WeakTrainerInterface.register
class TraPO2(RefineMethod):
    name = "trapo2"
    config_class = TraPO2Config
    data_needs = frozenset({"labels", "unlabeled"})

    def __init__(self, config: TraPO2Config | None = None):
        super().__init__(config)
        self.history = Histories(self.config.window)

    def construct_targets(self, batch: RolloutBatch) -> None:
        proposed = probes = 0
        for rows, visit in observe_groups(batch):
            key = str(batch.key[rows[0]])
            if visit.labeled:  # every visit is evidence; only unlabeled samples have a history here
                self.evidence(key, visit)
                continue
            probes += 1
            h = list(self.history.add(key, visit))
            candidate, slope, mode = promotion(h, self.config)
            self.evidence(key, visit, slope=slope, mode=mode, probes=self.history.visits[key])
            if candidate is not None:
                proposed += 1
                self.evidence(key, visit, kind="proposal", rule=RULE, field="reward_model.ground_truth",
                              before="", after=candidate, slope=slope, mode=mode, probes=len(h))
        self.log(probes=probes, promotions_proposed=proposed, tracked_samples=len(self.history.by_key))
        return None  # unlabeled rows get no target: they are dropped by admit()

    def admit(self, batch: RolloutBatch) -> np.ndarray:
        return np.asarray(batch.labeled, dtype=bool).copy()

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history.load_state_dict(state["history"])
