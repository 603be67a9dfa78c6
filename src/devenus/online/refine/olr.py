"""OLR, online label refinement (Yang et al. 2026): train against the policy's own stable, rising
majority instead of a (possibly noisy) given label.

Per visit of a sample: majority answer a_t (unique, or none) appended to its history H, majority pass
rate m_t appended to P (both bounded to the last ``window`` visits). slope = least-squares slope of P
(0 with fewer than two points). From visit ``start_epoch + 1`` on: if slope >= ``min_slope`` and the
unique mode of H is equivalent to a_t, this step's rollouts of that sample are graded against a_t
instead of the given label (S_y on labeled rows; the step re-grades them). The dataset is never edited.
See docs/methods/olr.md for the differences from the reference code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from devenus.online.config import MethodConfig, option
from devenus.online.refine.method import HistoryMethod
from devenus.online.rollouts import RolloutBatch, observe_groups
from devenus.online.registry import WeakTrainerInterface
from devenus.signals.trajectory import EPS, ls_slope
from devenus.signals.votes import equivalent, unique_mode


@dataclass
class OLRConfig(MethodConfig):
    start_epoch: int = option(4, "visits of a sample before refinement may start (refine from visit start_epoch + 1)", ge=0)
    min_slope: float = option(0.05, "least-squares slope of the majority pass rate at or above which the majority "
                                    "replaces the label", ge=0.0)
    window: int = option(16, "visits kept per sample (majority answers and pass rates); bounds memory", ge=2)


def olr_decision(history_answers: list[str | None], pass_rates: list[float], visits: int,
                 config: OLRConfig) -> tuple[str | None, float, str | None]:
    """(the target to train against or None, slope, mode) after a visit has been appended.

    ``history_answers`` / ``pass_rates``: the window, the current visit last; ``visits``: all visits so far.
    An empty history decides nothing; a NaN pass rate makes the slope NaN, which never refines."""
    slope = ls_slope(pass_rates)
    mode = unique_mode(history_answers)
    current = history_answers[-1] if history_answers else None
    if visits <= config.start_epoch or current is None or math.isnan(slope):
        return None, slope, mode
    if slope >= config.min_slope - EPS and equivalent(mode, current):
        return current, slope, mode
    return None, slope, mode


@WeakTrainerInterface.register
class OLR(HistoryMethod):
    name = "olr"
    mechanism_metrics = frozenset({"correction"})
    config_class = OLRConfig
    data_needs = frozenset({"labels"})
    may_change_labeled = True

    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        new = np.full(len(batch), None, dtype=object)
        corrections = refined = 0
        for rows, visit in observe_groups(batch):
            key = str(batch.key[rows[0]])
            h = self.history.add(key, visit)
            target, slope, mode = olr_decision([v.majority for v in h], [v.majority_pass_rate for v in h],
                                               self.history.visits[key], self.config)
            changed = target is not None and visit.labeled and not equivalent(target, visit.target)
            if target is not None and visit.labeled:
                refined += 1
                if changed:  # training against the label's own answer changes nothing: not a correction
                    new[rows] = target
                    corrections += 1
            self.evidence(key, visit, slope=slope, mode=mode, visits=self.history.visits[key],
                          refined=bool(target is not None), corrected=bool(changed), label=visit.target)
        self.log(corrections=corrections, refined_groups=refined, tracked_samples=len(self.history.by_key))
        return new
