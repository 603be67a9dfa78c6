"""Label noise with room for an effect: OLR vs GRPO at rho 0.5 and 0.9, inactive and active noise, on a pool
whose base pass rates spread around 0.5. The design of ``experiments/plans/label_noise_rho.md`` (written before
any run; its amendment, also before any run, explains the pool size and OLR's ``start_epoch``).

    devenus experiment label_noise_rho --arm rho0.9 --seed 0   # the rho 0.9 arms, one seed (the quick check)
    devenus experiment label_noise_rho --full                  # every arm, seeds 0-4
    devenus experiment label_noise_rho --report                # the table from the results on disk

- Arms per seed: ``grpo_clean`` (no noise: the cost of noise, reported, not a claim) and ``grpo`` / ``olr``
  on the same noisy pool for each (regime, rho). Claims (one Holm family): ``olr@X`` beats ``grpo@X``.
- Noise labels are truly wrong: inactive = a negative number of the answer's size (the policy never writes a
  minus sign); active = the base model's most common wrong answer among :data:`WRONG_SAMPLES` samples.
  The noise draw is in the dataset version's manifest; the true answer stays in ``simulation.hidden_answer``,
  so ``devenus/mechanism/correction/*`` is exact.
- Pool: :data:`POOL` questions per seed, stratified on the base pass rate (:mod:`devenus.experiments.pool`:
  the same count per 8-sample bin 1/8..7/8, no question at 0 or 1). 48 steps x 16 prompts = 6 visits per
  question; OLR refines from visit ``start_epoch + 1`` = 3, so corrections can act on the last 4 visits.
- Held-out: 512 ID, 256 near-OOD, 256 far-OOD questions, T=1, 4 samples each; never trained or tuned on.
"""

from __future__ import annotations

from devenus.experiments.definition import Budget, Definition
from devenus.experiments.pool import noisy_train_file, stratified_train_file
from devenus.experiments.runner import Arm

NAME = "label_noise_rho"
POOL = 128
RHOS = (0.9, 0.5)
REGIMES = ("inactive", "active")
#: base-model samples per question for active noise (at rho 0.9 nearly every pool question needs a wrong one)
WRONG_SAMPLES = 32
#: OLR's settings, from the budget's arithmetic before any run: 6 visits, so refinement from visit 3
OLR = {"start_epoch": 2}


def arm_name(method: str, regime: str, rho: float) -> str:
    return f"{method}@{regime}{rho:g}"


def plan() -> tuple[tuple[Arm, ...], dict[str, tuple[str, float]]]:
    """The arms, and arm name -> (regime, rho) for those that train on noisy labels."""
    arms, noise = [Arm("grpo_clean", "grpo")], {}
    for rho in RHOS:
        for regime in REGIMES:
            grpo, olr = arm_name("grpo", regime, rho), arm_name("olr", regime, rho)
            noise[grpo] = noise[olr] = (regime, rho)
            arms += [Arm(grpo, "grpo"), Arm(olr, "olr", method_config=OLR, baseline=grpo, claimed_side=1)]
    return tuple(arms), noise


ARMS, NOISE = plan()
GROUPS = {f"rho{rho:g}": ("grpo_clean",) + tuple(a for a, (_, r) in NOISE.items() if r == rho) for rho in RHOS}


#: the seed's stratified pool, clean or with the arm's noise, written once as a dataset version before any run
#: starts; drawn for this design's name, also for its replications
train_file = noisy_train_file(f"strat{POOL}", POOL, stratified_train_file(POOL, drawn_for=NAME).draw, NOISE,
                              WRONG_SAMPLES, f"wrong_pool{POOL}_n{WRONG_SAMPLES}")


DEFINITION = Definition(
    name=NAME,
    summary="OLR vs GRPO at rho 0.5 and 0.9 (inactive, active) on a pass-rate-stratified pool, 6 visits a question",
    arms=ARMS,
    budget=Budget(steps=48, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    seeds=(0, 1, 2, 3, 4),
    groups={**GROUPS, "quick": GROUPS["rho0.9"]},
    train_file=train_file,
)
