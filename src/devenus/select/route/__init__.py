"""Routing: one decision per question from its aggregated scores, vectorised (no loop per question).

Decisions: ``discard`` (left out of the next version), ``weak`` (kept unlabeled: weak supervision),
``annotate`` (an annotator's answer becomes its label), ``keep`` (a labeled row kept as it is).

- :mod:`.intervals`  keep questions whose pass rate lies in an interval, most uncertain first under a budget
- :mod:`.ratios`     annotate the top rho_a by uncertainty, discard the bottom rho_d, weak for the rest
- :mod:`.triage`     probe-calibrated thresholds for an unlabeled pool (discard / weak / annotate)
"""

from __future__ import annotations

from devenus.select.route.intervals import interval_mask, interval_route
from devenus.select.route.order import ANNOTATE, DECISIONS, DISCARD, KEEP, WEAK, check_scores, tiebreak, uncertainty_order
from devenus.select.route.ratios import ratio_route
from devenus.select.route.triage import calibrate, draw_probes, triage_route

__all__ = ["ANNOTATE", "DECISIONS", "DISCARD", "KEEP", "WEAK", "check_scores", "interval_mask", "interval_route",
           "ratio_route", "tiebreak", "uncertainty_order", "calibrate", "draw_probes", "triage_route"]
