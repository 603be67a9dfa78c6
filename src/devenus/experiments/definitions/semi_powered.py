"""``semi_paired``'s design and rule on twelve new seeds, sized from the per-seed spread seeds 1-8 showed: the plan
``experiments/plans/semi_powered.md`` (written before any run). One difference per seed (``semi@40``'s
pseudo-target precision minus ``ttrl@0``'s on the same pool), a paired t test and TOST at the mechanism margin.

    devenus experiment semi_powered --full      # seeds 9-20
    devenus experiment semi_powered --report    # the table from the results on disk
"""

from __future__ import annotations

from dataclasses import replace

from devenus.experiments.definition import text_report
from devenus.experiments.definitions import semi_paired

NAME = "semi_powered"
SEEDS = tuple(range(9, 21))

DEFINITION = replace(
    semi_paired.DEFINITION,
    name=NAME,
    summary="semi-supervised (40% labels) TTRL targets vs label-free TTRL's on seeds 9-20, the run as the unit",
    seeds=SEEDS,
    report=text_report("verdicts", lambda exp: semi_paired.paired_text(exp.finished(), SEEDS, NAME)),
)
