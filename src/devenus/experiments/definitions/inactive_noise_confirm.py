"""A confirmatory replication of ``label_noise_rho``'s inactive-noise claim at rho 0.5 on new seeds: the plan
``experiments/plans/inactive_noise_confirm.md`` (written before any run) chose the claim and the seed count
from the 5-seed pilot's variance; the verdict is read on these seeds alone (one claim, no Holm family).

    devenus experiment inactive_noise_confirm --seed 5     # one seed's two runs and its base validation
    devenus experiment inactive_noise_confirm --full       # seeds 5-14
    devenus experiment inactive_noise_confirm --report     # the table from the results on disk

The design is ``label_noise_rho``'s, arm for arm (seed k's pool and noise draw are the ones it would use).
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, replication_text, text_report
from devenus.experiments.definitions import label_noise_rho as pilot
from devenus.experiments.runner import Experiment

NAME = "inactive_noise_confirm"
REGIME, RHO = "inactive", 0.5
ARM_NAMES = tuple(pilot.arm_name(m, REGIME, RHO) for m in ("grpo", "olr"))
#: new seeds, disjoint from the pilot's
SEEDS = tuple(range(5, 15))
MARGIN = 0.03  # the plan's pre-registered equivalence margin (ID accuracy)
CLAIMS = ((pilot.arm_name("olr", REGIME, RHO), pilot.arm_name("grpo", REGIME, RHO), 1),)


def claims_text(recs: dict, pilot_recs: dict) -> str:
    """The plan's decision on the replication's seeds alone; the pilot's seeds and both pooled as a description
    (:func:`devenus.experiments.definition.replication_text`)."""
    return replication_text(NAME, recs, CLAIMS, MARGIN, SEEDS, pilot.NAME, pilot_recs, pilot.DEFINITION.seeds)


def _claims(exp: Experiment) -> str:
    return claims_text(exp.finished(), pilot.DEFINITION.finished_beside(exp))


DEFINITION = Definition(
    name=NAME,
    summary="label_noise_rho's inactive-noise claim at rho 0.5 replicated on seeds 5-14, decided on those alone",
    arms=tuple(a for a in pilot.ARMS if a.name in ARM_NAMES),
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    quick_seeds=SEEDS[:1],
    groups={f"rho{RHO:g}": ARM_NAMES},
    train_file=pilot.train_file,
    report=text_report("claims", _claims),
)
