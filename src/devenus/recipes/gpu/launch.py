"""Load, check and launch the GPU recipes; prepare their data from local files."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar

from devenus.config import Config, ConfigError, arg_type, config_from_dict, describe, load_file, option, suggest
from devenus.config.overrides import OverrideError, hydra_value, parse_override_line

HERE = files("devenus.recipes.gpu")


class RecipeError(ConfigError):
    """A recipe that cannot load or launch; one line naming the recipe and the key."""


@dataclass(frozen=True)
class Variables(Config):
    """What a launch fills into a recipe: the ``variables:`` of ``common.yaml`` and of each recipe name these
    (a folder variable with a file under it: ``data_dir/math500.parquet``)."""

    key_path: ClassVar[str] = ""
    error: ClassVar[type[ConfigError]] = RecipeError

    model: str = option("Qwen/Qwen3-4B-Base", "HF model folder or hub name")
    data_dir: str = option("data", "folder written by `prepare`")
    out_dir: str = option("outputs/gpu", "the run's checkpoints, validation dumps and metrics")
    nodes: int = option(1, "trainer.nnodes", ge=1)
    gpus: int = option(8, "trainer.n_gpus_per_node", ge=1)

    @classmethod
    def override(cls, key: str, value: str = "<value>") -> str:
        return f"--{key.replace('_', '-')} {value}"

    def resolved(self) -> "Variables":
        """Every path absolute, resolved here (the launch host): verl's Ray processes have no working directory
        of their own, and on other nodes a relative path names other files (docs/gpu.md, Multi-node)."""
        from devenus.adapters.verl.cluster_rules import MODEL_KEY, cwd_relative

        model = os.path.abspath(self.model) if cwd_relative(MODEL_KEY, self.model) else self.model
        return dataclasses.replace(self, model=model, data_dir=os.path.abspath(self.data_dir),
                                   out_dir=os.path.abspath(self.out_dir))


#: the variables a recipe may name, and those that are folders (a file may follow them)
VARIABLES = tuple(k.key for k in describe(Variables))
FOLDERS = ("data_dir", "out_dir")


@dataclass(frozen=True)
class Common(Config):
    """``common.yaml``: what every recipe shares."""

    error: ClassVar[type[ConfigError]] = RecipeError

    overrides: tuple[str, ...] = option((), "verl Hydra overrides, before the recipe's")
    variables: dict[str, str] = option({}, "verl key -> VARIABLE or VARIABLE/FILE, filled in at launch")

    def check(self) -> None:
        for i, line in enumerate(self.overrides):
            try:
                o = parse_override_line(line)
            except OverrideError as e:
                raise self.error(f"{self.key(f'overrides[{i}]')}: {e}") from None
            if "${" in str(o.value):
                raise self.error(f"{self.key(f'overrides[{i}]')}: {line!r} names a variable as text; set "
                                 f"{o.key} under `variables:` (one of {', '.join(VARIABLES)})")
        for key, ref in self.variables.items():
            var, _, file = ref.partition("/")
            if var not in VARIABLES:
                close = suggest(var, VARIABLES)
                raise self.error(f"{self.key(f'variables.{key}')}: no variable {var!r}"
                                 f"{f' (did you mean {close}?)' if close else ''}; the variables: {', '.join(VARIABLES)}")
            if file and var not in FOLDERS:
                raise self.error(f"{self.key(f'variables.{key}')}: {var} is not a folder, so {ref!r} names no file "
                                 f"(folders: {', '.join(FOLDERS)})")

    def filled(self, v: Variables) -> list[str]:
        """The ``variables:`` as overrides, each value the variable's own (a path joined, never text replaced)."""
        out = []
        for key, ref in self.variables.items():
            var, _, file = ref.partition("/")
            value: Any = getattr(v, var)
            out.append(f"{key}={hydra_value(os.path.join(value, file) if file else value)}")
        return out


@dataclass(frozen=True, kw_only=True)
class Recipe(Common):
    """One ``<name>.yaml``: a method, its training file and its overrides."""

    name: str = option(help="the recipe's file name, without .yaml")
    description: str = option(help="what the recipe trains, one line")
    method: str = option(help="devenus.method")
    train: str = option(help="the training file, under the data folder")
    reference: str = option(help="where the hyperparameters come from, and how they differ")


def recipe_names() -> list[str]:
    return sorted(p.name[:-5] for p in HERE.iterdir() if p.name.endswith(".yaml") and p.name != "common.yaml")


def _load(cls: type, recipe: str, folder: Path | None, **given: Any):
    """``cls`` from ``<recipe>.yaml`` (in ``folder``, default the package's) on the config mechanism; every
    error one line naming the recipe and the key."""
    path = Path(str((folder or HERE) / f"{recipe}.yaml"))
    if not path.is_file():
        raise RecipeError(f"no GPU recipe {recipe!r}; recipes: {', '.join(recipe_names())}")
    data = load_file(path, RecipeError)
    if set(given) & set(data):
        raise RecipeError(f"recipe {recipe} ({path}): {', '.join(sorted(set(given) & set(data)))} is the file's, "
                          f"not a key")
    try:
        return config_from_dict(cls, {**data, **given})
    except RecipeError as e:
        raise RecipeError(f"recipe {recipe} ({path}): {e}") from None


def load_common(folder: Path | None = None) -> Common:
    return _load(Common, "common", folder)


def load_recipe(name: str, folder: Path | None = None) -> Recipe:
    """Recipe ``name`` (``<folder>/<name>.yaml``; default: the recipes this package ships)."""
    return _load(Recipe, name, folder, name=name)


def recipe_overrides(recipe: Recipe, *, model: str, data_dir: str, out_dir: str, nodes: int = 1, gpus: int = 8,
                     extra: tuple[str, ...] = ()) -> list[str]:
    """The full ``devenus.train`` command line of a recipe: common overrides and variables, the recipe's, then
    ``extra``. Every path in it is absolute, resolved here (:meth:`Variables.resolved`); so are the relative
    paths of ``extra``."""
    from devenus.adapters.verl.cluster_rules import absolute_path_overrides

    try:
        v = Variables(model=model, data_dir=data_dir, out_dir=out_dir, nodes=nodes, gpus=gpus).resolved()
    except RecipeError as e:
        raise RecipeError(f"recipe {recipe.name}: {e}") from None
    common = load_common()
    return [*common.overrides, *common.filled(v), f"devenus.method={recipe.method}",
            f"data.train_files={hydra_value(os.path.join(v.data_dir, recipe.train))}",
            f"trainer.experiment_name={recipe.name}", *recipe.overrides, *recipe.filled(v),
            *absolute_path_overrides(list(extra))]


def eval_command(config, data_dir: str) -> list[str]:
    """``devenus eval`` of a run's last checkpoint: the paper's protocol on vLLM, at the training max length
    (the protocol's rule: evaluate at the length the model was trained with)."""
    if not os.path.isdir(data_dir):
        raise ValueError(f"--eval-data-dir {data_dir} is not a folder")
    return [sys.executable, "-m", "devenus", "eval", str(config.trainer.default_local_dir), "--protocol", "paper",
            "--data-dir", str(data_dir), "--max-new-tokens", str(int(config.data.max_response_length)),
            "--backend", "vllm", "--out", os.path.join(os.path.dirname(str(config.trainer.default_local_dir)), "eval")]


# ---------------------------------------------------------------------------------------------- data
def _devenus(*args: str) -> None:
    cmd = [sys.executable, "-m", "devenus", *args]
    print("$", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def noisy_dapo(data_dir: Path, rho: float, regime: str, seed: int = 0, force: bool = False) -> Path:
    """``dapo_math17k_<regime><rho>_s<seed>.parquet``: the OLR reference's label noise (a model-free regime of
    :mod:`devenus.testbed.noise`) on ``dapo_math17k.parquet``, as a dataset version of it."""
    from devenus.records import read_records
    from devenus.testbed.noise import MODEL_FREE_REGIMES, write_noisy_version

    if regime not in MODEL_FREE_REGIMES:
        raise ValueError(f"--noise-regime {regime!r}: the GPU data takes {' or '.join(MODEL_FREE_REGIMES)} "
                         f"(the others need the testbed's base model)")
    parent = data_dir / "dapo_math17k.parquet"
    if not parent.is_file():
        raise ValueError(f"--noise-rho needs {parent} (prepare it with --dapo first)")
    out = data_dir / f"dapo_math17k_{regime}{rho:g}_s{seed}.parquet"
    print(f"$ {regime} noise at rho={rho:g} (seed {seed}) on {parent}", flush=True)
    write_noisy_version(read_records(parent), parent, out, rho, regime, seed, force=force)
    return out


def prepare(data_dir: Path, dapo: str | None, math: str | None, math500: str | None, dapo_paired: str | None,
            force: bool = False, noise: tuple[float, str, int] | None = None) -> list[Path]:
    """Records files every recipe names, from local copies of the benchmarks (see docs/gpu.md); with
    ``noise`` = (rho, regime, seed), also a noisy copy of DAPO-Math-17k (:func:`noisy_dapo`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    f = ["--force"] if force else []
    made = []

    def hide_labels(src, fraction: str, name: str) -> Path:
        out = data_dir / f"{name}.parquet"
        _devenus("data", "hide-labels", str(src), "--labeled-fraction", fraction, "--out", str(out), *f)
        return out

    if dapo:
        full = data_dir / "dapo_math17k.parquet"
        # (the source file repeats each problem ~100 times: one row per problem, not 100 keys for one question)
        _devenus("import", dapo, "--from-verl", "--dedupe", "exact", "--source", "dapo_math17k", "--out", str(full), *f)
        made += [full, hide_labels(full, "0.0", "dapo_math17k_unlabeled"),
                 hide_labels(full, "0.1", "dapo_math17k_10pct")]
    if dapo_paired:  # originals and rewrites merged by `devenus data pair-views`
        made.append(hide_labels(dapo_paired, "0", "dapo_math17k_paired"))
    if math:
        full = data_dir / "math.parquet"
        _devenus("import", math, "--source", "math", "--out", str(full), *f)
        made += [full, hide_labels(full, "0", "math_unlabeled")]
    if math500:
        _devenus("import", math500, "--source", "math500", "--split", "test", "--out",
                 str(data_dir / "math500.parquet"), *f)
        made.append(data_dir / "math500.parquet")
    if noise is not None:
        made.append(noisy_dapo(data_dir, *noise, force=force))
    return made


# ---------------------------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devenus.recipes.gpu", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the recipes, with what each trains")
    pr = sub.add_parser("prepare", help="records files for the recipes, from local benchmark files")
    pr.add_argument("--data-dir", required=True, help="folder the recipes read their data from")
    pr.add_argument("--dapo", help="DAPO-Math-17k in verl's Parquet layout")
    pr.add_argument("--math", help="MATH train split (JSONL with problem/solution)")
    pr.add_argument("--math500", help="MATH-500 (JSONL with problem/answer): the in-training validation set")
    pr.add_argument("--dapo-paired", help="DAPO originals and rewrites merged by `devenus data pair-views` (Co-rewarding I)")
    pr.add_argument("--noise-rho", type=arg_type(float, ge=0, le=1), default=None,
                    help="also write dapo_math17k_<regime><rho>_s<seed>.parquet with this share of labels noisy")
    pr.add_argument("--noise-regime", choices=("sentinel", "redraw"), default="sentinel",
                    help="the OLR reference's inactive (sentinel) or active (redraw) noise (docs/methods/olr.md)")
    pr.add_argument("--noise-seed", type=arg_type(int, ge=0), default=0, help="which rows are noisy, and the redraws' seed")
    pr.add_argument("--force", action="store_true", help="replace existing files")
    r = sub.add_parser("run", help="launch a recipe (or check it with --dry-run)")
    r.add_argument("name", help="a recipe name (see `list`)")
    r.add_argument("--model", default="Qwen/Qwen3-4B-Base", help="HF model folder or hub name")
    r.add_argument("--data-dir", required=True, help="folder written by `prepare`")
    r.add_argument("--out", default="outputs/gpu", help="checkpoints, validation dumps and metrics go under "
                   "OUT/NAME (made absolute here; on a cluster, a shared file system every node mounts alike)")
    r.add_argument("--nodes", type=arg_type(int, ge=1), default=1, help="trainer.nnodes")
    r.add_argument("--gpus", type=arg_type(int, ge=1), default=8, help="trainer.n_gpus_per_node")
    r.add_argument("--timeout-s", type=arg_type(float, gt=0), default=None,
                   help="end the run (its whole process group, Ray's processes included) after this many seconds")
    r.add_argument("--dry-run", action="store_true", help="compose the config and run every pre-flight check; no Ray")
    r.add_argument("--eval-data-dir", default=None,
                   help="after training, evaluate the last checkpoint with `devenus eval` (the paper's protocol, "
                        "vLLM, the training max length) on the benchmark files in this folder")
    r.add_argument("overrides", nargs="*", help="more verl/DE-Venus overrides (they win)")
    args, rest = p.parse_known_args(argv)  # overrides may follow the options: argparse keeps them in `rest`
    if rest and (args.cmd != "run" or any(r.startswith("-") for r in rest)):
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.cmd == "run":
        args.overrides = [*args.overrides, *rest]
    try:
        if args.cmd == "list":
            for n in recipe_names():
                rec = load_recipe(n)
                print(f"{n:16s} {rec.method:13s} {rec.train:32s} {rec.description}")
            return 0
        if args.cmd == "prepare":
            noise = None if args.noise_rho is None else (args.noise_rho, args.noise_regime, args.noise_seed)
            for path in prepare(Path(args.data_dir), args.dapo, args.math, args.math500, args.dapo_paired, args.force,
                                noise):
                print(f"wrote {path}")
            return 0
        return _run(args)
    except (ValueError, OSError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _run(args) -> int:
    """``run NAME``: compose, check (``--dry-run`` stops there) and launch through the run component."""
    from devenus.commands import RunFailed
    from devenus.runs.launch import file_logger, launch

    rec = load_recipe(args.name)
    out_dir = Path(os.path.abspath(os.path.join(args.out, rec.name)))
    ov = recipe_overrides(rec, model=args.model, data_dir=args.data_dir, out_dir=str(out_dir), nodes=args.nodes,
                          gpus=args.gpus, extra=tuple(args.overrides))
    eval_dir = os.path.abspath(args.eval_data_dir) if args.eval_data_dir else None
    ev = None
    if args.dry_run or args.eval_data_dir:  # (the evaluation is checked before hours of training)
        from devenus.adapters.verl.train import SetupError, preflight

        checked, metrics = file_logger(ov, out_dir)  # what launch() hands the trainer
        try:
            config = preflight(checked)
        except SetupError as e:
            print(f"error: recipe {rec.name}: {e}", file=sys.stderr)
            return 1
        ev = eval_command(config, eval_dir) if eval_dir else None
    if args.dry_run:
        a = config.actor_rollout_ref
        print(f"recipe {rec.name}: {rec.description}\n  method {config.devenus.method}, model {a.model.path}, "
              f"{config.trainer.nnodes} x {config.trainer.n_gpus_per_node} GPUs, rollout {a.rollout.name}, "
              f"{config.data.train_batch_size} prompts x {a.rollout.n} rollouts, lr {a.actor.optim.lr}\n"
              f"  reference: {rec.reference}\n  metrics: {metrics} (verl's file logger: this launch's own file)")
        if ev:
            print("  then: " + shlex.join(ev))
        print("  pre-flight checks passed; launch without --dry-run")
        return 0
    print(f"recipe {rec.name}: training; output in {out_dir / 'train.log'}", flush=True)
    result = launch(ov, out_dir, timeout_s=args.timeout_s, on_step=_progress)
    try:
        result.check()
    except RunFailed as e:
        print(f"error: recipe {rec.name}: {e}", file=sys.stderr)
        return result.returncode if result.returncode > 0 else 1
    print(f"recipe {rec.name}: done in {result.wall_s:.0f} s; checkpoints in {out_dir / 'checkpoints'}", flush=True)
    return _evaluate(ev) if ev else 0


#: what a launch prints per step, with verl's validation (``val-core/...``): progress, not a record (the
#: metrics file is that)
PROGRESS_KEYS = ("critic/score/mean", "timing_s/step")


def _progress(m: dict) -> None:
    keys = [*PROGRESS_KEYS, *sorted(k for k in m if k.startswith("val-core/"))]
    shown = " ".join(f"{k}={m[k]:.4g}" for k in keys if isinstance(m.get(k), (int, float)))
    print(f"  step {m['step']} {shown}".rstrip(), flush=True)


def _evaluate(cmd: list[str]) -> int:
    """The evaluation after training: ``devenus eval`` of the last checkpoint, in this terminal."""
    print("$", shlex.join(cmd), flush=True)
    return subprocess.call(cmd)
