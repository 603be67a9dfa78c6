"""GeoMin with 10% of the labels against GRPO with all of them, on a pool whose base pass rates spread around
0.5: the design of ``experiments/plans/ten_percent_labels.md`` (written before any run; its amendment, also
before any run, takes TraPO out).

    devenus experiment ten_percent_labels --seed 0 --arm geomin@10   # one arm and its baselines, one seed
    devenus experiment ten_percent_labels --full                     # every arm, seeds 0-4
    devenus experiment ten_percent_labels --report                   # the table from the results on disk

- Arms: ``grpo_full`` (every label), ``grpo@10`` (the 51 labeled questions only), ``geomin@10`` (the labeled
  10% plus the unlabeled groups GeoMin's filter admits, trained against their majority answer), and the
  ``label_free`` plan's ``ttrl@0`` (no labels: TTRL's majority vote of 16 samples, agreement floor 0.5, as in
  the weak-supervision experiment; ``experiments/plans/label_free.md``), which shares ``grpo_full``.
- Claims (``experiments/power.py``, one Holm family): geomin@10 >= grpo_full (non-inferiority at the margin),
  geomin@10 > grpo@10. The runner's table compares geomin@10 with grpo@10 and ttrl@0 with grpo_full (the
  ``label_free`` plan's one claim, side -1, its own family).
- Pool: :data:`POOL` questions per seed stratified on the base pass rate (:mod:`devenus.experiments.pool`),
  51 of them labeled (``hide_labels`` at 0.1, seeded). 40 steps x 16 prompts = 1.25 visits per question.
  GeoMin decides within a step (its fits need this step's labeled rollouts: about 1.6 labeled groups a step,
  so ``min_per_class=4`` as in the 64-question pilot); it needs no revisits.
- Held-out: 512 ID, 256 near-OOD, 256 far-OOD questions, T=1, 4 samples each; never trained or tuned on.
"""

from __future__ import annotations

from devenus.experiments.definition import Budget, Definition
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import Arm

POOL = 512
LABELED = 0.1

DEFINITION = Definition(
    name="ten_percent_labels",
    summary="GeoMin with 10% labels vs GRPO with all labels and with the labeled 10%, 512-question stratified pool",
    arms=(
        Arm("grpo_full", "grpo", 1.0),
        Arm("grpo@10", "grpo", LABELED),
        Arm("geomin@10", "geomin", LABELED, {"min_per_class": 4}, baseline="grpo@10", claimed_side=1),
        Arm("ttrl@0", "ttrl", 0.0, {"votes": 16, "min_agreement": 0.5}, baseline="grpo_full", claimed_side=-1),
    ),
    budget=Budget(steps=40, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    seeds=(0, 1, 2, 3, 4),
    train_file=stratified_train_file(POOL),
)
