"""A confirmatory replication of ``label_noise_rho``'s two active-noise claims on new seeds: the plan
``experiments/plans/label_noise_confirm.md`` (written before any run) chose the claims and the seed count
from the 5-seed pilot's variances; the verdict is read on these seeds alone, Holm across the two claims.

    devenus experiment label_noise_confirm --seed 5     # one seed's four runs and its base validation
    devenus experiment label_noise_confirm --full       # seeds 5-12
    devenus experiment label_noise_confirm --report     # the table from the results on disk

The design is ``label_noise_rho``'s, arm for arm: the same arms, budget, OLR settings, and training file
(seed k's stratified pool and noise draw are the ones ``label_noise_rho`` would use for seed k).
:func:`replication` builds any such replication (``inactive_noise_confirm`` is another).
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, replication_text, text_report
from devenus.experiments.definitions import label_noise_rho as pilot

NAME = "label_noise_confirm"
#: the claims replicated, by (regime, rho); see the plan for why not the inactive ones
SETTINGS = (("active", 0.9), ("active", 0.5))
#: new seeds, disjoint from the pilot's
SEEDS = tuple(range(5, 13))
MARGIN = 0.03  # the plan's pre-registered equivalence margin (ID accuracy)


def olr_claims(settings) -> tuple[tuple[str, str, int], ...]:
    """OLR above GRPO at each ``(regime, rho)``: the claims, ``(arm, reference, side)``."""
    return tuple((pilot.arm_name("olr", regime, rho), pilot.arm_name("grpo", regime, rho), 1)
                 for regime, rho in settings)


def replication_claims(name: str, settings, seeds: tuple[int, ...], recs: dict, pilot_recs: dict) -> str:
    """The replication's decision on its own seeds alone (Holm over its claims); the pilot's seeds and both
    pooled as a description (:func:`devenus.experiments.definition.replication_text`)."""
    return replication_text(name, recs, olr_claims(settings), MARGIN, seeds, pilot.NAME, pilot_recs,
                            pilot.DEFINITION.seeds)


def replication(name: str, settings, seeds: tuple[int, ...], summary: str) -> Definition:
    """``label_noise_rho``'s GRPO and OLR arms at ``settings`` (``(regime, rho)`` pairs), unchanged, on new
    ``seeds``; its report decides :func:`olr_claims` on those seeds alone."""
    arm_names = tuple(pilot.arm_name(m, regime, rho) for regime, rho in settings for m in ("grpo", "olr"))
    return Definition(
        name=name, summary=summary,
        arms=tuple(a for a in pilot.ARMS if a.name in arm_names),
        budget=pilot.DEFINITION.budget,
        seeds=seeds,
        quick_seeds=seeds[:1],
        groups={f"rho{rho:g}": tuple(a for a in arm_names if a.endswith(f"{rho:g}")) for _, rho in settings},
        train_file=pilot.train_file,
        report=text_report("claims", lambda exp: replication_claims(
            name, settings, seeds, exp.finished(), pilot.DEFINITION.finished_beside(exp))),
    )


DEFINITION = replication(
    NAME, SETTINGS, SEEDS,
    summary="label_noise_rho's active-noise claims (rho 0.9, 0.5) replicated on seeds 5-12, decided on those alone")
