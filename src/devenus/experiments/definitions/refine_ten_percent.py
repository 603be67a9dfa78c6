"""Refinement with 10% labels on the CPU testbed: do TraPO's and GeoMin's filters make the unlabeled 90%
worth training on? Through verl's real trainer and the experiment runner (paired seeds, paired intervals).

    devenus experiment refine_ten_percent --quick     # every arm, seed 0      (budget: 30 min)
    devenus experiment refine_ten_percent --full      # every arm, seeds 0-2   (budget: 3 h)
    devenus experiment refine_ten_percent --report    # the table from the results on disk

Plan (written before any run of this experiment; the claim is the report's, tested in direction):
- Arms: ``grpo_full`` (every label), ``grpo@10`` (the labeled 10% only; unlabeled rows do not train),
  ``trapo@10`` and ``geomin@10`` (the labeled 10% plus the unlabeled rows their filter admits, trained
  against the group's majority answer).
- Claim: ``trapo@10`` and ``geomin@10`` beat ``grpo@10`` (claimed side +). Also reported: every arm
  against ``base`` (the same seed's step-0 validation).
- Pool: 64 training questions drawn per seed (the same pool for every arm of a seed), 6 of them
  labeled (``hide_labels`` at 0.1, seeded). Both methods decide on *revisits*: TraPO scores a sample's
  pass-rate trajectory over epochs, so a one-pass sweep over the 2,000-question train split would never
  score anything. 32 steps x 16 prompts over 64 questions = 8 visits per question.
- Budget-derived settings (chosen from this arithmetic, before any run, never on held-out numbers):
  TraPO ``warmup=4`` (the reference's 8 points would admit only on the last visit); GeoMin
  ``min_per_class=4`` (a step holds ~1.6 labeled groups = ~13 labeled rollouts, so 8 of each class, the
  default, would almost never be met). Everything else at the methods' defaults.
- Held-out: 512 ID, 256 near-OOD, 256 far-OOD questions, T=1, 4 samples each; never trained or tuned on.

Results: one JSON per (arm, seed) under experiments/results/refine_ten_percent/, the table in
refine_ten_percent.md (and .json) beside it.
"""

from __future__ import annotations

from devenus.experiments.definition import Budget, Definition
from devenus.experiments.pool import pool_train_file
from devenus.experiments.runner import Arm

POOL = 64
LABELED = 0.1

DEFINITION = Definition(
    name="refine_ten_percent",
    summary="TraPO and GeoMin with 10% labels vs GRPO on the labeled rows alone",
    arms=(
        Arm("grpo_full", "grpo", 1.0),
        Arm("grpo@10", "grpo", LABELED),
        Arm("trapo@10", "trapo", LABELED, {"warmup": 4}, baseline="grpo@10", claimed_side=1),
        Arm("geomin@10", "geomin", LABELED, {"min_per_class": 4}, baseline="grpo@10", claimed_side=1),
    ),
    # lr and KL as in the weak-supervision experiment (set there before any held-out number was seen)
    budget=Budget(steps=32, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    train_file=pool_train_file(POOL),
)
