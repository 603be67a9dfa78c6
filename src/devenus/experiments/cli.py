"""``devenus experiment``: run or report a registered experiment (:mod:`devenus.experiments.definition`).

    devenus experiment list                          # the registered experiments
    devenus experiment NAME --quick                  # every arm (or its quick set), seed 0
    devenus experiment NAME --full                   # every arm, the definition's seeds
    devenus experiment NAME --arm A,B --seed 1,2     # these arms (or arm groups) and their baselines
    devenus experiment NAME --report                 # the tables and pictures from the results on disk

Results go to ``experiments/results/NAME/`` under the current directory (the committed ones, when run from
the checkout), the tables beside that folder; runs and their data to ``outputs/NAME/``.
"""

from __future__ import annotations

import argparse
import os

from devenus.config import arg_type
from devenus.experiments.provenance import Mixing


def seed_list(text: str) -> list[int]:
    """``--seed``: one seed or several, comma-separated (``1,2``), each >= 0."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers, comma-separated (e.g. 0 or 1,2): {text!r}") from None
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be distinct integers >= 0: {text!r}")
    return seeds


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "experiment", help="run or report a registered experiment (paired arms and seeds through verl)",
        description="Run a registered experiment's arms and seeds through verl's trainer (resumable: finished "
                    "results are kept), or write its tables from the results on disk. Results: "
                    "experiments/results/NAME/ under the current directory; the tables beside that folder.")
    p.add_argument("name", metavar="NAME", help="a registered experiment, or 'list' to list them")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the quick arm set (default: every arm), seed 0 (or --seed)")
    mode.add_argument("--full", action="store_true", help="every arm (or --arm), the definition's seeds")
    mode.add_argument("--report", action="store_true", help="the tables and pictures from the results on disk")
    p.add_argument("--arm", help="only these arms or arm groups (comma-separated), plus the baselines they are "
                                 "compared with")
    p.add_argument("--seed", type=seed_list, help="seed(s) for --quick and --arm: 0 or 1,2 (default: 0)")
    p.add_argument("--jobs", type=arg_type(int, ge=1), help="runs side by side (default: the definition's, 2)")
    p.add_argument("--force", action="store_true", help="rerun finished (arm, seed) results")
    p.add_argument("--no-shared-ray", action="store_true", help="let every run start its own Ray (for measuring)")
    p.add_argument("--run-timeout", type=arg_type(float, ge=0.0),
                   help="seconds before a run is killed and recorded as failed (0: never; default: the definition's, "
                        "3600): a rollout server that errors leaves verl waiting forever")
    p.add_argument("--steps", type=arg_type(int, ge=1),
                   help="override the budget's steps, for every arm (equal epochs off): a smoke test, needs "
                        "--results outside experiments/results")
    p.add_argument("--work", help="run folders and data (default: outputs/NAME)")
    p.add_argument("--results", help="per-run JSONs (default: experiments/results/NAME); the tables beside it")
    Mixing.add_flags(p)
    p.set_defaults(fn=cmd_experiment, usage_error=p.error)


def cmd_experiment(args) -> int:
    from pathlib import Path

    from devenus.experiments.definition import EXPERIMENTS, RESULTS_ROOT

    if args.name == "list":
        for name in EXPERIMENTS.names():
            d = EXPERIMENTS.get(name)
            print(f"{name}: {d.summary} ({len(d.arms)} arms; seeds {','.join(map(str, d.seeds))}; model {d.model})")
        return 0
    d = EXPERIMENTS.get(args.name)
    if not (args.quick or args.full or args.report or args.arm):
        args.usage_error("choose --quick, --full, --arm NAME[,NAME] or --report")
    if args.full and args.seed:
        args.usage_error(f"--full runs seeds {','.join(map(str, d.seeds))}: --seed goes with --quick or --arm")
    budget = None
    if args.steps is not None:
        if args.results is None or Path(args.results).resolve().is_relative_to(RESULTS_ROOT.resolve()):
            args.usage_error("--steps is for smoke tests: give --results (and --work) outside experiments/results")
        from dataclasses import replace

        budget = replace(d.budget, steps=args.steps, epochs=None)  # the smoke test's steps win over equal epochs
    exp = d.experiment(args.results, args.work, budget=budget, run_timeout_s=args.run_timeout,
                       mixing=Mixing.from_args(args))
    if args.report and not exp.results.is_dir():
        raise ValueError(f"no results at {exp.results} (run from the checkout, or name them with --results)")
    if not args.report:
        seeds = list(d.seeds) if args.full else args.seed or list(d.quick_seeds)
        exp.run(seeds, d.arm_names(args.arm, args.quick), jobs=args.jobs or min(d.jobs, os.cpu_count() or 1), force=args.force,
                shared_ray=not args.no_shared_ray)
    print(d.write_report(exp))
    return 0
