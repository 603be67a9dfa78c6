"""A confirmatory replication of ``label_noise_rho``'s two active-noise claims on new seeds: the plan
``experiments/plans/label_noise_confirm.md`` (written before any run) chose the claims and the seed count
from the 5-seed pilot's variances; the verdict is read on these seeds alone, Holm across the two claims.

    devenus experiment label_noise_confirm --seed 5     # one seed's four runs and its base validation
    devenus experiment label_noise_confirm --full       # seeds 5-12
    devenus experiment label_noise_confirm --report     # the table from the results on disk

The design is ``label_noise_rho``'s, arm for arm: the same arms, budget, OLR settings, and training file
(seed k's stratified pool and noise draw are the ones ``label_noise_rho`` would use for seed k).
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, replication_text, text_report
from devenus.experiments.definitions import label_noise_rho as pilot
from devenus.experiments.runner import Experiment

NAME = "label_noise_confirm"
#: the claims replicated, by (regime, rho); see the plan for why not the inactive ones
SETTINGS = (("active", 0.9), ("active", 0.5))
ARM_NAMES = tuple(pilot.arm_name(m, regime, rho) for regime, rho in SETTINGS for m in ("grpo", "olr"))
#: new seeds, disjoint from the pilot's
SEEDS = tuple(range(5, 13))
MARGIN = 0.03  # the plan's pre-registered equivalence margin (ID accuracy)
CLAIMS = tuple((pilot.arm_name("olr", regime, rho), pilot.arm_name("grpo", regime, rho), 1) for regime, rho in SETTINGS)


def claims_text(recs: dict, pilot_recs: dict) -> str:
    """The plan's decision on the replication's seeds alone (Holm over :data:`CLAIMS`); the pilot's seeds and
    both pooled as a description (:func:`devenus.experiments.definition.replication_text`)."""
    return replication_text(NAME, recs, CLAIMS, MARGIN, SEEDS, pilot.NAME, pilot_recs, pilot.DEFINITION.seeds)


def _claims(exp: Experiment) -> str:
    return claims_text(exp.finished(), pilot.DEFINITION.finished_beside(exp))


DEFINITION = Definition(
    name=NAME,
    summary="label_noise_rho's active-noise claims (rho 0.9, 0.5) replicated on seeds 5-12, decided on those alone",
    arms=tuple(a for a in pilot.ARMS if a.name in ARM_NAMES),
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    quick_seeds=SEEDS[:1],
    groups={f"rho{rho:g}": tuple(a for a in ARM_NAMES if a.endswith(f"{rho:g}")) for _, rho in SETTINGS},
    train_file=pilot.train_file,
    report=text_report("claims", _claims),
)
