"""Refinement with 10% labels on the CPU testbed: do TraPO's and GeoMin's filters make the unlabeled 90%
worth training on? Through verl's real trainer and the experiment runner (paired seeds, paired intervals).

    python experiments/refine_ten_percent.py --quick     # every arm, seed 0      (budget: 30 min)
    python experiments/refine_ten_percent.py --full      # every arm, seeds 0-2   (budget: 3 h)
    python experiments/refine_ten_percent.py --report    # the table from the results on disk

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

import argparse
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from devenus.experiments.provenance import Mixing, exit_on_mixed
from devenus.experiments.runner import Arm, Experiment, pool_train_file, seed_list

NAME = "refine_ten_percent"
RESULTS = Path(__file__).parent / "results" / NAME
SEEDS = (0, 1, 2)
POOL = 64
LABELED = 0.1


def arms() -> list[Arm]:
    return [
        Arm("grpo_full", "grpo", 1.0),
        Arm("grpo@10", "grpo", LABELED),
        Arm("trapo@10", "trapo", LABELED, {"warmup": 4}, baseline="grpo@10", claimed_side=1),
        Arm("geomin@10", "geomin", LABELED, {"min_per_class": 4}, baseline="grpo@10", claimed_side=1),
    ]


@dataclass(frozen=True)
class Budget:
    # lr and KL as in the weak-supervision experiment (set there before any held-out number was seen)
    steps: int = 32
    prompts_per_step: int = 16
    rollouts_per_prompt: int = 8
    val_n: int = 4
    kl_coef: float = 0.01
    lr: float = 5e-5


BUDGET = Budget()


train_file = pool_train_file(NAME, POOL)


def experiment(results: Path = RESULTS, work: Path = Path(f"outputs/{NAME}"), budget: Budget = BUDGET,
               run_timeout_s: float | None = 3600) -> Experiment:
    return Experiment(NAME, arms(), asdict(budget), results=results, work=work, train_file=train_file,
                      run_timeout_s=run_timeout_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="every arm, seed 0 (or --seed)")
    mode.add_argument("--full", action="store_true", help=f"every arm, seeds {SEEDS}")
    mode.add_argument("--report", action="store_true", help="the table from the results on disk")
    ap.add_argument("--arm", help="only these arms (comma-separated), plus the baselines they are compared with")
    ap.add_argument("--seed", type=seed_list, default=[0], help="seed(s) for --quick and --arm: 0 or 1,2")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs side by side")
    ap.add_argument("--force", action="store_true", help="rerun finished (arm, seed) results")
    ap.add_argument("--run-timeout", type=float, default=3600, help="seconds before a run is killed and recorded as failed")
    ap.add_argument("--work", default=f"outputs/{NAME}")
    ap.add_argument("--results", default=str(RESULTS), help="per-run JSONs go here; the table beside it")
    Mixing.add_flags(ap)
    args = ap.parse_args()
    exp = experiment(Path(args.results), Path(args.work), run_timeout_s=args.run_timeout or None)
    exp.mixing = Mixing.from_args(args)
    if args.report:
        print(exp.report())
        return
    if not (args.quick or args.full or args.arm):
        ap.error("choose --quick, --full, --arm NAME[,NAME] or --report")
    seeds = list(SEEDS) if args.full else args.seed
    exp.run(seeds, args.arm.split(",") if args.arm else None, jobs=args.jobs, force=args.force)
    print(exp.report())


if __name__ == "__main__":
    sys.exit(exit_on_mixed(main))
