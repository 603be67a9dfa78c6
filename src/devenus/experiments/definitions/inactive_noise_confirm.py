"""A confirmatory replication of ``label_noise_rho``'s inactive-noise claim at rho 0.5 on new seeds: the plan
``experiments/plans/inactive_noise_confirm.md`` (written before any run) chose the claim and the seed count
from the 5-seed pilot's variance; the verdict is read on these seeds alone (one claim, no Holm family).

    devenus experiment inactive_noise_confirm --seed 5     # one seed's two runs and its base validation
    devenus experiment inactive_noise_confirm --full       # seeds 5-14
    devenus experiment inactive_noise_confirm --report     # the table from the results on disk

The design is ``label_noise_rho``'s, arm for arm (seed k's pool and noise draw are the ones it would use),
built as ``label_noise_confirm`` is (:func:`~devenus.experiments.definitions.label_noise_confirm.replication`).
"""

from __future__ import annotations

from devenus.experiments.definitions.label_noise_confirm import replication

NAME = "inactive_noise_confirm"
SETTINGS = (("inactive", 0.5),)
#: new seeds, disjoint from the pilot's 0-4
SEEDS = tuple(range(5, 15))


DEFINITION = replication(
    NAME, SETTINGS, SEEDS,
    summary="label_noise_rho's inactive-noise claim at rho 0.5 replicated on seeds 5-14, decided on those alone")
