"""``devenus train``: train a model on your own records files through verl, sized for a CPU or a GPU node.

The overrides come from the sizings DE-Venus already runs, never copied here:

- ``--size cpu``, model ``testbed``: :class:`devenus.runs.testbed.RunConfig`'s defaults (the testbed's runs);
- ``--size cpu``, any other model: :func:`devenus.smollm2.run_config` (a ~100M-parameter chat model on 1-2 cores);
- ``--size gpu``: the GPU recipe of the method (``devenus.recipes.gpu``: ``common.yaml`` + ``<recipe>.yaml``).

On top of them: the user's train and validation files, a checkpoint at the last step (``trainer.save_freq``
> 0: verl 0.9.1 saves when ``global_steps % save_freq == 0`` or at the last step), verl's ``file`` tracker
alone (the run component prints one readable line per step from it, :mod:`devenus.runs.console`), then the
user's own overrides, which win. The run goes through :func:`devenus.runs.launch.launch` (process group,
watchdog, timeout, a metrics file per launch); at the end a summary names the checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
from pathlib import Path
from typing import Sequence

from devenus.config import arg_type
from devenus.config.overrides import hydra_value, last_value

SIZES = ("cpu", "gpu")


def _existing(path: str, flag: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{flag} {path}: no such file")
    return str(p.resolve())


def cpu_sizing(model: str, model_path: str, method: str, train: str, val: Sequence[str], steps: int | None,
               seed: int):
    """The :class:`devenus.runs.testbed.RunConfig` of a CPU run (see the module docstring)."""
    from devenus.runs.testbed import RunConfig
    from devenus.smollm2 import run_config

    if model == "testbed":
        cfg = RunConfig(method=method, seed=seed, train_file=train, val_files=tuple(val), model_dir=model_path)
    else:
        cfg = dataclasses.replace(run_config(method, train, val[0], model=model_path, seed=seed), val_files=tuple(val))
    if steps is not None:
        cfg = dataclasses.replace(cfg, steps=steps)
    return dataclasses.replace(cfg, save_freq=cfg.steps)  # one checkpoint, at the last step


def train_overrides(*, model: str, model_path: str, train: str, val: Sequence[str], method: str, size: str,
                    out_dir: str | Path, steps: int | None = None, seed: int = 0, recipe: str | None = None,
                    extra: Sequence[str] = ()) -> list[str]:
    """The full ``python -m devenus.train`` command line of a ``devenus train`` run (paths absolute)."""
    out_dir = Path(out_dir).resolve()
    train = _existing(train, "--train")
    val = [_existing(v, "--val") for v in val]
    ours = ["trainer.logger=[file]"]  # the run component adds the file tracker's path and prints from it
    if size == "cpu":
        from devenus.runs.testbed import overrides

        cfg = cpu_sizing(model, model_path, method, train, val, steps, seed)
        cfg = dataclasses.replace(cfg, extra_overrides=(*ours, *extra))
        return ["devenus.backend=cpu", *overrides(None, out_dir, cfg)]
    if size != "gpu":
        raise ValueError(f"--size {size!r}: one of {', '.join(SIZES)}")
    from devenus.recipes.gpu.launch import load_recipe, recipe_names, recipe_overrides

    name = recipe or method
    if name not in recipe_names():
        raise ValueError(f"no GPU recipe named {name!r} (give --recipe); recipes: {', '.join(recipe_names())}")
    rec = load_recipe(name)
    if rec.method != method:
        raise ValueError(f"GPU recipe {name!r} trains method {rec.method!r}, not --method {method!r}")
    mine = [f"data.train_files={hydra_value(train)}", f"data.val_files={hydra_value(val)}", f"data.seed={seed}",
            f"actor_rollout_ref.rollout.seed={seed}", f"actor_rollout_ref.actor.data_loader_seed={seed}"]
    if steps is not None:
        mine.append(f"trainer.total_training_steps={steps}")
    # recipe_overrides fills ${data_dir} in common.yaml; the user's files replace what it names
    return recipe_overrides(rec, model=model_path, data_dir=os.path.dirname(train), out_dir=str(out_dir),
                            extra=(*mine, *ours, *extra))


def checkpoint_of(overrides: Sequence[str]) -> Path | None:
    """The step folder verl's resume pointer names under the run's ``trainer.default_local_dir`` (None: none saved)."""
    from devenus.adapters.verl.checkpoint import STEP_PREFIX, pointer_step

    root = last_value(overrides, "trainer.default_local_dir")
    step = pointer_step(root) if root else None
    return None if step is None else Path(root) / f"{STEP_PREFIX}{step}"


def preflight_overrides(overrides: Sequence[str], size: str) -> list[str]:
    """What ``devenus.train``'s pre-flight sees: on the CPU, its backend's overrides in front (as
    ``devenus.backend=cpu`` adds them at launch; the user's come later and win)."""
    from devenus.adapters.verl.cpu.launch import cpu_overrides

    return [*cpu_overrides(), *overrides] if size == "cpu" else list(overrides)


# ---------------------------------------------------------------------------------------------- CLI
def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a model on your own records files through verl (CPU- or GPU-sized)",
        description="Train MODEL with METHOD on records files through verl (python -m devenus.train), sized for "
                    "this CPU or for a GPU node; one readable line per step, a summary at the end and a "
                    "checkpoint at the last step. verl overrides after -- win over the sizing (docs/trainer.md).")
    p.add_argument("--model", required=True, help="testbed, smollm2 (devenus model list) or an HF model folder / hub id")
    p.add_argument("--train", required=True, help="training records file (devenus import)")
    p.add_argument("--val", required=True, nargs="+", help="validation records file(s), reported per data source")
    p.add_argument("--method", default="grpo", help="a method name (devenus methods; default: grpo)")
    p.add_argument("--size", choices=SIZES, default="cpu",
                   help="cpu: the testbed's sizing for model testbed, else a ~100M chat model's on 1-2 cores; "
                        "gpu: the method's GPU recipe (one 8-GPU node, vLLM; docs/gpu.md). Default: cpu")
    p.add_argument("--recipe", default=None, help="with --size gpu: the GPU recipe (default: the one named as --method)")
    p.add_argument("--steps", type=arg_type(int, ge=1), default=None,
                   help="training steps (default: the sizing's: 30 testbed, 2 chat model on the CPU, one epoch on GPUs)")
    p.add_argument("--seed", type=arg_type(int, ge=0), default=0, help="data order and sampling seed (default: 0)")
    p.add_argument("--out", required=True, help="run folder: train.log, metrics/, validation/, checkpoints/")
    p.add_argument("--force", action="store_true", help="empty --out first (else a run with checkpoints there resumes)")
    p.add_argument("--timeout", type=arg_type(float, gt=0), default=None, help="kill the run after this many seconds")
    p.add_argument("--dry-run", action="store_true",
                   help="print the overrides and run devenus.train's pre-flight checks; start nothing")
    p.add_argument("overrides", nargs="*", help="after --: verl / DE-Venus Hydra overrides (they win)")
    p.set_defaults(fn=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from devenus.runs.console import step_line, summary_lines
    from devenus.runs.launch import launch
    from devenus.sources import resolve_model

    extra = [o for o in args.overrides if o != "--"]
    out = Path(args.out).resolve()
    ov = train_overrides(model=args.model, model_path=resolve_model(args.model), train=args.train, val=args.val,
                         method=args.method, size=args.size, out_dir=out, steps=args.steps, seed=args.seed,
                         recipe=args.recipe, extra=extra)
    if args.dry_run:
        from devenus.adapters.verl.train import SetupError, preflight

        print(shlex.join(["python", "-m", "devenus.train", *ov]))
        try:
            config = preflight(preflight_overrides(ov, args.size))
        except SetupError as e:
            raise ValueError(f"devenus.train's pre-flight: {e}") from None
        steps = config.trainer.total_training_steps or "one epoch of"
        print(f"pre-flight checks passed: {config.devenus.method} on {config.data.train_files}, {steps} steps, "
              f"checkpoints in {config.trainer.default_local_dir}")
        return 0
    if args.force and out.exists():
        shutil.rmtree(out)
    if checkpoint_of(ov) is not None:
        print(f"resuming from {checkpoint_of(ov)} (--force starts afresh)")
    total = last_value(ov, "trainer.total_training_steps")
    print(f"training {args.method} on {args.train} ({args.size} sizing, model {args.model}); "
          f"verl's output: {out / 'train.log'}", flush=True)
    res = launch(ov, out, timeout_s=args.timeout, on_step=lambda m: print(step_line(m, total), flush=True))
    res.check("devenus train")
    print("\n".join(summary_lines(res.metrics, res.wall_s, checkpoint_of(ov))))
    print(f"metrics per step: {out / 'metrics'}")
    return 0
