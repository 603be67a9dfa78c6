"""A real pretrained model on data nobody here wrote: SmolLM2-135M-Instruct trained through verl's real
trainer on the shipped DeepMind ``mathematics_dataset`` set (src/devenus/data/mathematics_dataset), through
the experiment runner (paired seeds, provenance, resumable). Plan: experiments/plans/real_model.md.

    python experiments/real_model.py --quick            # every arm, seed 0
    python experiments/real_model.py --full             # every arm, seeds 0-1 (about 90 min wall, 2 runs at a time)
    python experiments/real_model.py --report           # the table from the results on disk

Arms: ``base`` (validation only), ``grpo`` (every label), ``ttrl`` (no label: majority-vote pseudo
rewards), ``semi@10`` (TTRL on the unlabeled 90%, the gold reward on the labeled 10%: 102 questions).
Labels are hidden with ``devenus.records.hide_labels``; a hidden answer stays as simulation truth for
TTRL's pseudo-target precision (a mechanism metric; no method reads it).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from devenus.experiments.provenance import Mixing, exit_on_mixed
from devenus.experiments.runner import Arm, Experiment, seed_list

NAME = "real_model"
RESULTS = Path(__file__).parent / "results" / NAME
SEEDS = (0, 1)
MODEL = "smollm2"


def arms() -> list[Arm]:
    return [
        Arm("grpo", "grpo", 1.0),
        # the 0.5 agreement floor of weak_supervision.py (chosen there on training-side pseudo-label accuracy):
        # abstentions count as votes, so a group where most samples give no answer gets no target
        Arm("ttrl", "ttrl", 0.0, {"min_agreement": 0.5}, baseline="grpo", claimed_side=-1),
        Arm("semi@10", "ttrl", 0.1, {"min_agreement": 0.5}, baseline="ttrl", claimed_side=1),
    ]


@dataclass(frozen=True)
class Budget:
    # Set before any finished run (not tuned; a first sizing of 10 x 8 x 8 with 512 held-out questions measured
    # 327 s a step and over 6 min a validation on the shared 2 cores and was stopped): 6 steps x 8 prompts x 4
    # rollouts (48 prompt visits of 1,024); lr 1e-5, ten times the smoke-test sizing's (devenus.smollm2.run_config),
    # so that a few steps can move a 135M model; no KL; 96 new tokens (the eval's). One sample per held-out
    # question at T=1 over every other question of each file (128 ID + 128 OOD, every module): seeds and
    # questions, not samples, are the lever here.
    steps: int = 6
    prompts_per_step: int = 8
    rollouts_per_prompt: int = 4
    val_n: int = 1
    kl_coef: float = 0.0
    lr: float = 1e-5
    max_response_length: int = 96
    max_prompt_length: int = 160
    micro_batch: int = 8


BUDGET = Budget()


def train_file(arm: Arm, seed: int, work: Path) -> Path:
    """The shipped train split with the arm's fraction of labels kept (seeded; written once, atomically)."""
    from devenus.data import mathematics_dataset
    from devenus.records import hide_labels, read_records, write_records

    source = mathematics_dataset("train")
    if arm.labeled_fraction >= 1.0:
        return source
    path = Path(work).resolve() / "data" / f"train_{arm.labeled_fraction:g}_s{seed}.parquet"  # absolute: Ray's workers
    if not path.exists():
        write_records(hide_labels(read_records(source), arm.labeled_fraction, seed=seed), path)
    return path


def validation_file(split: str, work: Path) -> Path:
    """Every other question of the shipped ``split`` (the files are ordered by module, so each module keeps
    half its questions), written once."""
    from devenus.data import mathematics_dataset
    from devenus.records import read_records, write_records

    path = Path(work).resolve() / "data" / f"{split}_half.parquet"  # absolute: Ray's workers have no cwd
    if not path.exists():
        write_records(read_records(mathematics_dataset(split))[::2], path)
    return path


def experiment(results: Path = RESULTS, work: Path = Path("outputs/real_model"), budget: Budget = BUDGET,
               run_timeout_s: float | None = 3600) -> Experiment:
    validation = {split: validation_file(split, work) for split in ("test_id", "test_ood")}
    return Experiment(NAME, arms(), asdict(budget), results=results, work=work, train_file=train_file,
                      run_timeout_s=run_timeout_s, validation=validation, model=MODEL)


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
    ap.add_argument("--work", default="outputs/real_model")
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
