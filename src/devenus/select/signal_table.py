"""The selection signals as one table: each signal's name, what it needs and how its per-sample and
per-question uncertainties ("higher = more uncertain") come from what the score stage computed.

``answers`` signals come from the G extracted answers (and, for ``accuracy``, the row's label);
``forward`` signals from the teacher-forced pass (:func:`devenus.select.score.forward_signals`, each by
its registered unit in :mod:`devenus.select.forward`), whose raw score is multiplied by ``sign`` and
aggregated over the samples by ``score.aggregation``. The config's
choices, the score stage and the docs' signal table read this registry (:mod:`devenus.registry`); adding a
signal: docs/adding_a_signal.md.
No torch here: the config imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from devenus.registry import Registry


@dataclass(frozen=True)
class Signal:
    name: str
    #: "answers" (the extracted answers) or "forward" (the teacher-forced pass)
    source: str
    #: forward signals: +1 when the raw score already grows with uncertainty, -1 to negate it
    sign: int = 1
    #: the question needs its label (a signal that is NaN on unlabeled rows)
    needs_labels: bool = False
    #: answers signals: (answer_signals' dict, pass rate or None, G) -> (per-sample u [G], question u)
    from_answers: Callable[[dict[str, Any], float | None, int], tuple[np.ndarray, float]] | None = None
    #: on by default (pivot_trace is opt-in: its 256-token look-back means nothing on short responses)
    default: bool = True
    #: forward signals: the :class:`~devenus.select.forward.ForwardUnit` computing it, as "module:Class"
    unit: str = ""

    def scores(self, answers: dict[str, Any], pass_rate: float | None, raw: np.ndarray | None, g: int,
               aggregate: Callable[[np.ndarray], float]) -> tuple[np.ndarray, float]:
        """(per-sample uncertainty [G], the question's): from the answers, or ``sign * raw`` aggregated."""
        if self.from_answers is not None:
            return self.from_answers(answers, pass_rate, g)
        per = self.sign * np.asarray(raw, dtype=np.float64)
        return per, aggregate(per)


def _accuracy(a, p, g):
    if a["rewards"] is None:
        return np.full(g, np.nan), float("nan")
    return 1.0 - a["rewards"], 1.0 - p


def _consistency(a, p, g):
    return a["u_consistency_sample"], a["consistency"]


#: signal name -> :class:`Signal`, in the order the score stage computes and records them (part of the score
#: stage's identity: ``score.signals`` defaults to this order)
TABLE: Registry[Signal] = Registry("signal", ordered=True)
#: forward signal name -> its unit (imported, with torch, when the score stage runs it)
UNITS: Registry = Registry("forward signal", ordered=True)
_FORWARD = "devenus.select.forward"


def register(signal: Signal) -> Signal:
    """Add a signal (a forward one's ``unit`` too); a taken name is an error naming both."""
    if (signal.source == "forward") != bool(signal.unit):
        raise ValueError(f"signal {signal.name!r}: a forward signal names its unit, an answers signal none")
    TABLE.register(signal.name, signal)
    if signal.unit:
        UNITS.register(signal.name, signal.unit)
    return signal


for _s in (
    Signal("accuracy", "answers", needs_labels=True, from_answers=_accuracy),
    Signal("consistency", "answers", from_answers=_consistency),
    Signal("entropy", "forward", +1, unit=f"{_FORWARD}.token_stats:TokenStats"),
    Signal("self_certainty", "forward", -1, unit=f"{_FORWARD}.token_stats:TokenStats"),
    Signal("coe_r", "forward", -1, unit=f"{_FORWARD}.coe:CoE"),
    Signal("coe_c", "forward", -1, unit=f"{_FORWARD}.coe:CoE"),
    Signal("cot_kinetics", "forward", +1, unit=f"{_FORWARD}.kinetics:Kinetics"),
    Signal("pivot_trace", "forward", +1, default=False, unit=f"{_FORWARD}.pivot:PivotTrace"),
):
    register(_s)

SIGNALS = tuple(TABLE)
MODEL_SIGNALS = tuple(n for n, s in TABLE.items() if s.source == "forward")
DEFAULT_SIGNALS = tuple(n for n, s in TABLE.items() if s.default)
