"""``devenus lifecycle CONFIG``: rounds of train -> evidence -> transition, with a report per round."""

from __future__ import annotations

import argparse


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "lifecycle", help="run rounds of train on D(k) -> evidence -> transition -> D(k+1), with reports",
        description="Rounds of training (python -m devenus.train), probe evidence, devenus transition; a JSON and "
                    "Markdown report per round. Rerunning skips finished rounds. Config: YAML (see "
                    "src/devenus/configs/lifecycle/testbed.yaml and docs/lifecycle.md).")
    p.add_argument("config", help="the lifecycle YAML")
    p.set_defaults(fn=cmd_lifecycle)


def cmd_lifecycle(args: argparse.Namespace) -> int:
    from devenus.lifecycle.config import load_config
    from devenus.lifecycle.markdown import markdown
    from devenus.lifecycle.run import run_lifecycle

    cfg = load_config(args.config)
    reports = run_lifecycle(cfg)
    print(markdown(reports), end="")
    print(f"reports under {cfg.out_dir}")
    return 0
