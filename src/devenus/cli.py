"""``devenus``: the command line of the offline side (testbed, import, demo).

Training runs through verl's own entry point with Hydra overrides (see README); this CLI covers what
happens outside the training loop.
"""

from __future__ import annotations

import argparse
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
    """The embedded default: build (or reuse) the testbed, train its base model with GRPO through
    verl's real trainer on this machine, and report held-out accuracy before and after."""
    from tqdm import tqdm

    from devenus.recipes.testbed_train import RunConfig, run
    from devenus.report import pm, table
    from devenus.testbed import build_testbed

    tb = build_testbed(_testbed_config(args), cache_dir=args.cache_dir, force=args.force)
    print(f"testbed: {tb.root} (base model = SFT step {tb.report['sft']['chosen_step']})")
    cfg = RunConfig(method="grpo", steps=args.steps, seed=args.seed)
    out = Path(args.out) / f"grpo_s{args.seed}"
    if out.exists():
        import shutil

        shutil.rmtree(out)  # a demo starts fresh: verl would otherwise resume from its checkpoints
    print(f"training with GRPO through verl ({cfg.steps} steps x {cfg.prompts_per_step} prompts x "
          f"{cfg.rollouts_per_prompt} rollouts); full log: {out / 'train.log'}")
    bar = tqdm(total=cfg.steps, desc="GRPO", unit="step")

    def on_line(line: str) -> None:
        from devenus.recipes.testbed_train import parse_console_metrics

        for m in parse_console_metrics([line]):
            if m["step"] > 0 and "critic/score/mean" in m:
                bar.set_postfix(reward=f"{m['critic/score/mean']:.2f}", refresh=False)
                bar.update(1)

    res = run(tb, out, cfg, on_line=on_line)
    bar.close()
    if res.returncode != 0 or len(res.validation) < 2:
        print(f"training failed (exit code {res.returncode}); see {res.log}", file=sys.stderr)
        return 1
    first, last = min(res.validation), max(res.validation)
    before, after = res.validation[first], res.validation[last]
    rows = []
    for split in before:
        b, a = before[split]["sampled"], after[split]["sampled"]
        rows.append([split, before[split]["n"], pm(b["mean"], b["ci95"]), pm(a["mean"], a["ci95"]), f"{a['mean'] - b['mean']:+.3f}"])
    k = before[next(iter(before))]["sampled"]["k"]
    print(f"\nheld-out accuracy, sampled T=1 avg@{k} (95% CI over questions), via verl's validation:")
    print(table(["split", "questions", f"step {first}", f"step {last}", "change"], rows))
    print(f"\nwall time {res.wall_s:.0f} s; metrics per step in {res.log}")
    return 0


def cmd_hide_labels(args) -> int:
    from devenus.records import hide_labels, read_records, write_records

    rows = hide_labels(read_records(args.input), args.labeled_fraction, args.seed)
    write_records(rows, args.out)
    n = sum(r["extra_info"]["labeled"] for r in rows)
    print(f"wrote {args.out}: {n}/{len(rows)} rows labeled")
    return 0


def cmd_pair_views(args) -> int:
    from devenus.records.pairs import pair_view_files

    try:
        rows = pair_view_files(args.original, args.paraphrase, args.out)
    except (ValueError, FileNotFoundError) as e:  # RecordError is a ValueError
        print(f"devenus data pair-views: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {len(rows) // 2} pairs ({len(rows)} rows), each original followed by its rewrite")
    return 0


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

    d = sub.add_parser("demo", help="the embedded default: GRPO on the CPU testbed through verl, before/after accuracy")
    testbed_args(d)
    d.add_argument("--force", action="store_true", help="rebuild the testbed even if cached")
    d.add_argument("--steps", type=int, default=30)
    d.add_argument("--out", default="outputs/demo", help="run folder (log, validation dumps)")
    d.set_defaults(fn=cmd_demo)

    from devenus.records.cli import add_import_arguments, run_import

    i = sub.add_parser("import", help="convert raw JSONL/CSV/Parquet into the record contract")
    add_import_arguments(i)
    i.set_defaults(fn=run_import)

    data = sub.add_parser("data", help="label-state transforms of record files").add_subparsers(dest="data_cmd", required=True)
    h = data.add_parser("hide-labels", help="keep a fraction of labels; move the rest to simulation truth")
    h.add_argument("input")
    h.add_argument("--labeled-fraction", type=float, required=True)
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--out", required=True)
    h.set_defaults(fn=cmd_hide_labels)
    pv = data.add_parser("pair-views", help="merge originals and their rewrites (joined by extra_info.pair_key)")
    pv.add_argument("original")
    pv.add_argument("paraphrase")
    pv.add_argument("--out", required=True)
    pv.set_defaults(fn=cmd_pair_views)
    return p


def main(argv: list[str] | None = None) -> int:
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
