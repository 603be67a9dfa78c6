"""A confirmatory replication of the ``label_free`` plan's claim (label-free TTRL trails full-label GRPO) on
new seeds: the plan ``experiments/plans/label_free_confirm.md`` (written before any run). The pilot's three
seeds (``ten_percent_labels``' ``ttrl@0`` vs ``grpo_full``, seeds 0-2) gave -0.103 ± 0.117, inconclusive;
the verdict is read on seeds 5-9 alone.

    devenus experiment label_free_confirm --full      # seeds 5-9
    devenus experiment label_free_confirm --report    # the table from the results on disk

The design is ``ten_percent_labels``' for these two arms (budget, TTRL settings, a 512-question pool
stratified on the base pass rate: the one ``ten_percent_labels`` would draw for each seed).
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, replication_text, text_report
from devenus.experiments.definitions import ten_percent_labels as pilot
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.provenance import Mixing
from devenus.experiments.runner import Experiment

NAME = "label_free_confirm"
ARM_NAMES = ("grpo_full", "ttrl@0")
#: new seeds, disjoint from ten_percent_labels' 0-4
SEEDS = tuple(range(5, 10))
PILOT_SEEDS = (0, 1, 2)  # the label_free plan's seeds
MARGIN = 0.03
CLAIMS = (("ttrl@0", "grpo_full", -1),)


def _claims(exp: Experiment) -> str:
    # the pilot's pairs span two code versions, as the label_free plan allowed; a description here, not a test
    pilot_recs = {k: r for k, r in pilot.DEFINITION.finished_beside(exp, Mixing(code=True)).items() if k[1] in PILOT_SEEDS}
    return replication_text(NAME, exp.finished(), CLAIMS, MARGIN, SEEDS, pilot.DEFINITION.name, pilot_recs, PILOT_SEEDS)


DEFINITION = Definition(
    name=NAME,
    summary="label-free TTRL vs full-label GRPO (the label_free plan's claim) replicated on seeds 5-9",
    arms=tuple(a for a in pilot.DEFINITION.arms if a.name in ARM_NAMES),
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    train_file=stratified_train_file(pilot.POOL, drawn_for=pilot.DEFINITION.name),
    report=text_report("claims", _claims),
)
