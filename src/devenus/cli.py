"""``devenus``: the command line of the offline side (testbed, import, demo).

Training runs through verl's own entry point with Hydra overrides (see README); this CLI covers what
happens outside the training loop.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _testbed_config(args):
    from devenus.testbed import TestbedConfig

    return TestbedConfig(seed=args.seed)


def cmd_testbed_build(args) -> int:
    from devenus.report import accuracy_table
    from devenus.testbed import build_testbed

    tb = build_testbed(_testbed_config(args), cache_dir=args.cache_dir, force=args.force)
    rep = tb.report
    print(f"testbed: {tb.root}")
    print(f"base model: SFT step {rep['sft']['chosen_step']}, built in {rep['build_seconds']} s")
    print(accuracy_table(rep["base_accuracy"]))
    return 0


def cmd_testbed_noise(args) -> int:
    from devenus.records import read_records, write_records
    from devenus.testbed import build_testbed
    from devenus.testbed.noise import inject_noise, sample_wrong_answers

    tb = build_testbed(_testbed_config(args), cache_dir=args.cache_dir)
    rows = read_records(tb.split("train"))
    wrong = None
    if args.regime == "active":
        import torch

        torch.set_num_threads(1)
        model, tok = tb.load_model()
        print(f"sampling {args.samples} answers per question from the base model for {len(rows)} questions ...")
        wrong = sample_wrong_answers(model, tok, rows, args.samples, seed=args.seed)
    noisy = inject_noise(rows, args.rho, args.regime, args.seed, wrong)
    out = Path(args.out or tb.root / "data" / f"train_noisy_{args.regime}_{args.rho:g}.parquet")
    write_records(noisy, out)
    n = sum(r["simulation"]["noise"] != "none" for r in noisy)
    print(f"wrote {out}: {n}/{len(noisy)} targets replaced ({args.regime})")
    return 0


def cmd_demo(args) -> int:
    """The embedded default: build (or reuse) the testbed and report the base model."""
    rc = cmd_testbed_build(args)
    print("\n(The base model leaves room for RL: training through verl arrives with the verl integration.)")
    return rc


def cmd_import(args) -> int:
    from devenus.records.cli import main_import

    return main_import(args.rest)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="devenus", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def testbed_args(sp):
        sp.add_argument("--seed", type=int, default=0)
        sp.add_argument("--cache-dir", default=None, help="default: $DEVENUS_CACHE or ~/.cache/devenus")

    tb = sub.add_parser("testbed", help="the CPU testbed").add_subparsers(dest="tb_cmd", required=True)
    b = tb.add_parser("build", help="build (or reuse) the testbed and print the base model's accuracy")
    testbed_args(b)
    b.add_argument("--force", action="store_true", help="rebuild even if cached")
    b.set_defaults(fn=cmd_testbed_build)
    n = tb.add_parser("noise", help="write a noisy-label copy of the train split")
    testbed_args(n)
    n.add_argument("--rho", type=float, required=True)
    n.add_argument("--regime", choices=("inactive", "active"), required=True)
    n.add_argument("--samples", type=int, default=8, help="base-model samples per question (active)")
    n.add_argument("--out", default=None)
    n.set_defaults(fn=cmd_testbed_noise)

    d = sub.add_parser("demo", help="the embedded default job on the CPU testbed")
    testbed_args(d)
    d.add_argument("--force", action="store_true")
    d.set_defaults(fn=cmd_demo)

    i = sub.add_parser("import", help="convert raw JSONL/CSV/Parquet into the record contract", add_help=False)
    i.add_argument("rest", nargs=argparse.REMAINDER)
    i.set_defaults(fn=cmd_import)
    return p


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
