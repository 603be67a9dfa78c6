"""``geomin_mechanism`` replicated on new seeds (13-28), decided on those alone by the same rule: the plan
``experiments/plans/geomin_confirm.md`` (written before any run).

    devenus experiment geomin_confirm --full      # seeds 13-28
    devenus experiment geomin_confirm --report    # the verdict from the results on disk
"""

from __future__ import annotations

from dataclasses import replace

from devenus.experiments.definition import text_report
from devenus.experiments.definitions import geomin_mechanism as pilot

NAME = "geomin_confirm"
SEEDS = tuple(range(13, 29))

DEFINITION = replace(  # the pilot's arm, budget and training files
    pilot.DEFINITION,
    name=NAME,
    summary="geomin_mechanism's admitted vs rejected pseudo-label precision replicated on seeds 13-28 pooled",
    seeds=SEEDS,
    quick_seeds=SEEDS[:1],
    report=text_report("verdicts", lambda exp: pilot.verdict_text(exp.finished(), NAME, SEEDS)),
)
