"""Label noise on the CPU testbed: does online label refinement (OLR), or NL-OLR v2's offline
correction, beat GRPO on noisy labels, for inactive and active noise? Through verl's real trainer and the
experiment runner (paired seeds, paired intervals).

    devenus experiment label_noise --quick                # rho 0.5, both regimes, seed 0 (budget: 30 min)
    devenus experiment label_noise --full                 # rho 0.1/0.3/0.5, both regimes, seeds 0-2
    devenus experiment label_noise --full --arm reference # the OLR reference's regimes at rho 0.5, seeds 0-2
    devenus experiment label_noise --report               # the table from the results on disk

Plan (written before any run of this experiment; the claim is the report's, tested in direction):
- Arms per (regime, rho): ``grpo`` on the noisy labels and ``olr`` on the same noisy labels; plus
  ``grpo_clean`` (no noise) as the ceiling. Claim: ``olr`` beats ``grpo`` of the same (regime, rho) and
  seed (claimed side +). Also reported: every arm against ``base``; per step, the share of OLR's
  corrections whose new target is the hidden truth (``devenus/target/correction_precision``).
- NL-OLR v2 (added 2026-12-02, before any run of its arms) never edits a label during training: it
  trains exactly as GRPO and writes correction proposals as evidence, so it takes two rounds, as in
  ``devenus lifecycle`` (docs/lifecycle.md). Per (regime, rho): ``nl_olr2`` trains on the noisy pool
  (round 1: the evidence; same training as ``grpo``, so its difference to ``grpo`` is a control, not a
  claim, expected to be 0), then ``nl_olr2_d1`` trains GRPO from the base model, for the same steps, on
  D(1) = the noisy pool with round 1's proposals applied by ``devenus transition --rule correct``
  (default thresholds). Claim: ``nl_olr2_d1`` beats ``grpo`` of the same (regime, rho) and seed
  (claimed side +); reported with the transition's accepted corrections and their precision and recall
  against the hidden truth. It costs two training runs where the other arms cost one.
- Noise: ``inactive`` (a negative number of the right size: the policy never writes a minus sign) and
  ``active`` (the most common wrong answer among 16 base-model samples at T=1, drawn among questions
  that have one), at ratio rho of the pool's labels (``devenus.testbed.noise``).
- The OLR reference's own noise protocol (added 2026-12-03, issue 23 item 5, before any run of its arms;
  docs/methods/olr.md): ``sentinel`` (its inactive noise: the noisy target is an unmatchable sentinel, every
  rollout of a noisy row scores 0) and ``redraw`` (its active noise: at every visit the target is a wrong
  answer drawn from that step's own rollouts of the row, seeded by (seed, step, key); the sentinel when
  the step produced none). Arms at rho 0.5 only: ``grpo@sentinel0.5``, ``olr@sentinel0.5``,
  ``grpo@redraw0.5``, ``olr@redraw0.5``; the two regimes share a seed's noisy rows. Claim: ``olr`` beats
  ``grpo`` of the same regime and seed (claimed side +), as the reference reports for both regimes; also
  reported beside the committed table, against ``base`` and ``grpo_clean`` (reused, not rerun). Run with
  ``--full --arm reference`` (3 seeds) or as part of ``--full``. Not reproduced from the reference: its 800 DAPO
  questions sampled at base pass rate 0.5 (the pool is the same 64 testbed questions as every other arm)
  and its per-row Bernoulli count of noisy rows (here exactly round(rho * 64)).
- Pool: 64 training questions drawn per seed (the same pool, and the same noisy rows, for every arm of
  a seed and noise setting). OLR decides on revisits (the slope of a sample's majority pass rate over
  visits, from visit ``start_epoch + 1`` = 5); 32 steps x 16 prompts over 64 questions = 8 visits per
  question. Method settings: the defaults, unchanged.
- Held-out: 512 ID, 256 near-OOD, 256 far-OOD questions, T=1, 4 samples each; never trained or tuned on.
- Cost: 25 arms + base per seed (29 with the reference's regimes). Quick mode runs rho 0.5 only (9 runs: the first 5 ran before the
  NL-OLR v2 arms existed; their results are unchanged by the addition).

Results: one JSON per (arm, seed) under experiments/results/label_noise/, the table in label_noise.md
(and .json) beside it.
"""

from __future__ import annotations

from devenus.experiments.definition import Budget, Definition
from devenus.experiments.pool import noisy_train_file, pool_train_file
from devenus.experiments.runner import Arm, Transition

NAME = "label_noise"
RHOS = (0.1, 0.3, 0.5)
REGIMES = ("inactive", "active")
QUICK_RHOS = (0.5,)
#: the OLR reference's regimes (devenus.testbed.noise), at these ratios, with these methods
REF_REGIMES = ("sentinel", "redraw")
REF_RHOS = (0.5,)
POOL = 64
WRONG_SAMPLES = 16
METHODS = ("olr",)


def arm_name(method: str, regime: str, rho: float) -> str:
    return f"{method}@{regime}{rho:g}"


def plan() -> tuple[tuple[Arm, ...], dict[str, tuple[str, float]]]:
    """The arms, and arm name -> (regime, rho) for those that train on noisy labels."""
    out, noise = [Arm("grpo_clean", "grpo")], {}
    # NL-OLR v2's two rounds on the testbed's regimes; the reference's regimes compare OLR with GRPO only
    settings = [(regime, rho, True) for regime in REGIMES for rho in RHOS]
    settings += [(regime, rho, False) for regime in REF_REGIMES for rho in REF_RHOS]
    for regime, rho, two_round in settings:
        grpo = arm_name("grpo", regime, rho)
        noise[grpo] = (regime, rho)
        out.append(Arm(grpo, "grpo"))
        for method in METHODS:
            name = arm_name(method, regime, rho)
            noise[name] = (regime, rho)
            out.append(Arm(name, method, baseline=grpo, claimed_side=1))
        if two_round:
            evidence, d1 = arm_name("nl_olr2", regime, rho), arm_name("nl_olr2_d1", regime, rho)
            noise[evidence] = noise[d1] = (regime, rho)
            out.append(Arm(evidence, "nl_olr2", baseline=grpo))  # a control: it trains as grpo does
            out.append(Arm(d1, "grpo", baseline=grpo, claimed_side=1, transition=Transition(evidence, "correct")))
    return tuple(out), noise


ARMS, NOISE = plan()
#: --quick: rho 0.5 in both regimes (the committed quick set); ``reference``: the OLR reference's protocol
GROUPS = {
    "quick": tuple(a.name for a in ARMS if a.name in NOISE and NOISE[a.name][1] in QUICK_RHOS
                   and NOISE[a.name][0] in REGIMES),
    "reference": tuple(name for name, (regime, _) in NOISE.items() if regime in REF_REGIMES),
}


#: the arm's seeded pool, clean or with its noise, written once as a dataset version before any run starts
train_file = noisy_train_file(f"pool{POOL}", POOL, pool_train_file(POOL).draw, NOISE, WRONG_SAMPLES,
                              f"wrong_pool{POOL}")


DEFINITION = Definition(
    name=NAME,
    summary="OLR and NL-OLR v2 (two rounds) vs GRPO on noisy labels: inactive/active noise, the OLR reference's regimes",
    arms=ARMS,
    # lr and KL as in the weak-supervision experiment (set there before any held-out number was seen)
    budget=Budget(steps=32, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    groups=GROUPS,
    train_file=train_file,
)
