"""``devenus``: the command line of the offline side (testbed, demo, import, data transforms).

Training runs through verl's own entry point with Hydra overrides (see README); ``devenus train`` launches
it with sized presets, and the rest of this CLI covers what happens outside the training loop. Each
package mounts its own commands: a module listed in :data:`COMMAND_MODULES` exposes
``add_parser(subparsers)``. Errors a user can fix (bad input, an existing output, a missing file, a full
disk) print ``error: ...`` and exit 1, usage errors exit 2, and neither shows a traceback
(``DEVENUS_DEBUG=1`` shows it).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from devenus.commands import RunFailed, fraction, run_command
from devenus.config import arg_type

#: = devenus.testbed.noise.REGIMES (kept here so parsing imports nothing heavy; a test checks they agree)
NOISE_REGIMES = ("inactive", "active", "sentinel", "redraw")

DESCRIPTION = (
    "DE-Venus: data-efficient RL with verifiable rewards on verl. Offline commands: the CPU testbed, "
    "the demo, data import and label-state transforms. Training: devenus train (sized presets), or "
    "python -m devenus.train <verl overrides>."
)

#: modules that mount their own sub-commands (each exposes ``add_parser(subparsers)``), in help order
COMMAND_MODULES: tuple[str, ...] = (
    "devenus.records.cli",  # import, data hide-labels, data pair-views
    "devenus.online.cli",  # methods
    "devenus.recipes.train",  # train
    "devenus.evaluate.cli",  # eval
    "devenus.select.cli",  # select generate|score|route|materialize|run
    "devenus.transitions.cli",  # transition
    "devenus.lifecycle.cli",  # lifecycle
    "devenus.experiments.cli",  # experiment list|NAME
)

def _testbed_config(args):
    from devenus.testbed import TestbedConfig

    return TestbedConfig(seed=args.seed)


def cmd_testbed_build(args) -> int:
    from devenus.tables import accuracy_table
    from devenus.testbed import build_testbed
    from devenus.testbed.shipped import describe_gap, model_hash, recipe_gap, shipped_dir

    tb = build_testbed(_testbed_config(args), cache_dir=args.cache_dir, force=args.force, rebuild=args.rebuild)
    rep = tb.report
    print(f"testbed: {tb.root}")
    src = rep.get("base_model", {})  # absent in reports written before weights shipped
    print(f"base model: SFT step {rep['sft']['chosen_step']} ({src.get('source', 'sft')}, hash {model_hash(tb.model_dir)}), "
          f"built in {rep['build_seconds']} s")
    print(accuracy_table(rep["base_accuracy"]))
    if args.rebuild and shipped_dir(tb.config.key()):
        print(describe_gap(recipe_gap(rep, tb.config.key())))
    return 0


def cmd_testbed_noise(args) -> int:
    from devenus.records import read_records
    from devenus.records.versions import check_output
    from devenus.testbed import build_testbed
    from devenus.testbed.noise import NEEDS_WRONG_ANSWERS, sample_wrong_answers, write_noisy_version

    tb = build_testbed(_testbed_config(args), cache_dir=args.cache_dir)
    parent = tb.split("train")
    out = Path(args.out or tb.root / "data" / f"train_noisy_{args.regime}_{args.rho:g}.parquet")
    check_output(out, [parent], force=args.force)  # before minutes of sampling, not after
    rows = read_records(parent)
    wrong = None
    if args.regime in NEEDS_WRONG_ANSWERS:
        import torch

        torch.set_num_threads(1)
        model, tok = tb.load_model()
        print(f"sampling {args.samples} answers per question from the base model for {len(rows)} questions ...")
        wrong = sample_wrong_answers(model, tok, rows, args.samples, seed=args.seed,
                                     progress=False if args.no_progress else None)
    noisy, m = write_noisy_version(rows, parent, out, args.rho, args.regime, args.seed, wrong, force=args.force,
                                   config={"samples": args.samples if wrong is not None else None})
    n = sum(r["simulation"]["noise"] != "none" for r in noisy)
    print(f"wrote {out}: {n}/{len(noisy)} targets replaced ({args.regime}); manifest {m.path}")
    return 0


def cmd_demo(args) -> int:
    """The embedded default: build (or reuse) the testbed, train its base model with GRPO through
    verl's real trainer on this machine, and report held-out accuracy before and after."""
    from tqdm import tqdm

    from devenus.tables import pm, table
    from devenus.runs.testbed import RunConfig, accuracy_by_split, run
    from devenus.testbed import build_testbed

    tb = build_testbed(_testbed_config(args), cache_dir=args.cache_dir, force=args.force)
    from devenus.testbed.shipped import model_hash

    # the hash names the weights every figure of this run is made on (docs/testbed.md, shipped weights)
    print(f"testbed: {tb.root} (base model {model_hash(tb.model_dir)} = SFT step {tb.report['sft']['chosen_step']})")
    cfg = RunConfig(method="grpo", steps=args.steps, seed=args.seed)
    out = Path(args.out) / f"grpo_s{args.seed}"
    if out.exists():
        import shutil

        shutil.rmtree(out)  # a demo starts fresh: verl would otherwise resume from its checkpoints
    print(f"training with GRPO through verl ({cfg.steps} steps x {cfg.prompts_per_step} prompts x "
          f"{cfg.rollouts_per_prompt} rollouts); full log: {out / 'train.log'}")
    bar = tqdm(total=cfg.steps, desc="GRPO", unit="step")

    def on_step(m: dict) -> None:
        if m["step"] > 0 and "critic/score/mean" in m:
            bar.set_postfix(reward=f"{m['critic/score/mean']:.2f}", refresh=False)
            bar.update(1)

    res = run(tb, out, cfg, on_step=on_step)
    bar.close()
    accuracy = accuracy_by_split(tb, res.validation)
    if not res.ok or len(accuracy) < 2:
        res.check("the demo's training run")
        raise RunFailed(f"the demo's training run validated {len(accuracy)} time(s), not 2 (log: {res.log})")
    first, last = min(accuracy), max(accuracy)
    before, after = accuracy[first], accuracy[last]
    rows = []
    for split in before:
        b, a = before[split]["sampled"], after[split]["sampled"]
        rows.append([split, before[split]["n"], pm(b["mean"], b["ci95"]), pm(a["mean"], a["ci95"]), f"{a['mean'] - b['mean']:+.3f}"])
    k = before[next(iter(before))]["sampled"]["k"]
    print(f"\nheld-out accuracy, sampled T=1 avg@{k} (95% CI over questions), via verl's validation:")
    print(table(["split", "questions", f"step {first}", f"step {last}", "change"], rows))
    print(f"\nwall time {res.wall_s:.0f} s; metrics per step in {res.out_dir / 'metrics'}, the log in {res.log}")
    return 0


def cmd_model_path(args) -> int:
    from devenus.sources import resolve_model

    print(resolve_model(args.name))  # stdout holds only the folder: model.path=$(devenus model path smollm2)
    return 0


def cmd_model_list(args) -> int:
    from devenus.sources import model_sources

    for name, help in model_sources():
        print(f"{name}: {help}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="devenus", description=DESCRIPTION)
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def testbed_args(sp):
        sp.add_argument("--seed", type=arg_type(int, ge=0), default=0, help="seed of the testbed (and of the command's sampling; default: 0)")
        sp.add_argument("--cache-dir", default=None, help="default: $DEVENUS_CACHE or ~/.cache/devenus")

    tb = sub.add_parser("testbed", help="the CPU testbed").add_subparsers(dest="tb_cmd", required=True, metavar="{build,noise}")
    b = tb.add_parser("build", help="build (or reuse) the testbed and print the base model's accuracy")
    testbed_args(b)
    b.add_argument("--force", action="store_true", help="build anew even if cached (the default seed reinstalls the shipped weights)")
    b.add_argument("--rebuild", action="store_true",
                   help="train the base model by SFT from scratch into <cache>/testbed/rebuild-<key>/ (the testbed itself is untouched)")
    b.set_defaults(fn=cmd_testbed_build)
    n = tb.add_parser("noise", help="write a noisy-label copy of the train split (a dataset version with its manifest)")
    testbed_args(n)
    n.add_argument("--rho", type=fraction, required=True, help="share of the labeled targets replaced, in [0, 1]")
    n.add_argument("--regime", choices=NOISE_REGIMES, required=True,
                   help="inactive: a negative number the policy never writes; active: the base model's most frequent "
                        "wrong answer, fixed offline; the OLR reference's: sentinel: an unmatchable target; redraw: "
                        "a wrong answer redrawn online from each step's rollouts (docs/testbed.md)")
    n.add_argument("--samples", type=arg_type(int, ge=1), default=8, help="base-model samples per question (active)")
    n.add_argument("--out", default=None, help="default: <testbed>/data/train_noisy_<regime>_<rho>.parquet")
    n.add_argument("--force", action="store_true", help="replace --out if it exists (never the train split)")
    n.add_argument("--no-progress", action="store_true", help="no progress bar")
    n.set_defaults(fn=cmd_testbed_noise)

    d = sub.add_parser("demo", help="the embedded default: GRPO on the CPU testbed through verl, before/after accuracy")
    testbed_args(d)
    d.add_argument("--force", action="store_true", help="rebuild the testbed even if cached")
    d.add_argument("--steps", type=arg_type(int, ge=1), default=30, help="training steps (default: 30)")
    d.add_argument("--out", default="outputs/demo", help="run folder (log, validation dumps)")
    d.set_defaults(fn=cmd_demo)

    mp = sub.add_parser("model", help="the embedded models (testbed, smollm2): their HF folders")
    msub = mp.add_subparsers(dest="model_cmd", required=True, metavar="{path,list}")
    pp = msub.add_parser("path", help="print a model's HF folder (built or converted on first use)")
    pp.add_argument("name", help="a registered model name (devenus model list)")
    pp.set_defaults(fn=cmd_model_path)
    msub.add_parser("list", help="the registered model names").set_defaults(fn=cmd_model_list)

    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return p


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked: package metadata costs ~0.15 s of every start-up."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")  # stdout, as argparse's own version action
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("devenus")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)  # usage errors: argparse prints them and exits 2
    return run_command(args.fn, args)


if __name__ == "__main__":
    sys.exit(main())
