"""One runner for the testbed experiments: paired arms and seeds through verl's real trainer.

    from devenus.experiments.runner import Arm, Experiment
    exp = Experiment("my_exp", arms=[Arm("grpo_full"), Arm("ttrl@0", "ttrl", baseline="base")],
                     budget={"steps": 16, "lr": 5e-5}, results=Path("experiments/results/my_exp"))
    exp.run(seeds=[0, 1, 2], jobs=2)     # resumable: finished (arm, seed) results are kept
    print(exp.report())                   # paired differences with Student-t intervals

What every run shares, by construction:

- **Pairing.** Every arm of one seed gets the same ``data.seed``/``actor.data_loader_seed`` (same data
  order) and the same ``actor_rollout_ref.rollout.seed``; the CPU rollout server seeds each request
  from (seed, step, request id, prompt), so identical configs draw identical samples. Each arm is
  compared with its ``baseline`` run of the *same seed*.
- **Validation.** verl's own validation after the last step, T=1, ``val_n`` samples per question, on
  512 ID questions (``test_id`` + ``test_id_extra``), 256 near-OOD (``add_long``, ``add_mixed``) and
  256 far-OOD (``count``, ``max``) questions (see :mod:`devenus.testbed.near_ood`). The ``base``
  arm (``trainer.val_only``) is every arm's step 0, run once per seed.
- **Launching** goes through :func:`devenus.runs.launch` (a process group with a watchdog, the
  timeout, a stop on SIGTERM); metrics come from verl's ``file`` tracker, never from console output;
  per-question scores from ``trainer.validation_data_dir``.
- **Provenance.** Each result records its code version, base-model weights, data files' hashes and
  config (:mod:`devenus.experiments.provenance`). A table or a paired difference over results of more
  than one code version or set of weights is refused unless :class:`Mixing` allows it; allowed mixed
  weights still pair only runs of the same weights.
- **Mechanism metrics.** Each result's ``mechanism`` holds the run's mechanism metrics (its steps'
  numerators summed over their denominators, with the per-step series; :mod:`devenus.experiments.mechanism`);
  the report tabulates them per arm, mean over seeds with its interval.
- **Resume.** One JSON per (arm, seed), written atomically; a rerun skips those whose config
  fingerprint and base-model weights (:meth:`Experiment.base_model_id`) match and reruns the rest from
  scratch. A finished result is never overwritten: the one a rerun replaces moves to
  ``superseded/<reason>/`` (``weights``, ``config``, ``code`` or ``rerun``), out of the report's reach.
- **Two rounds.** An arm with a :class:`Transition` trains on D(1): its seed's training data after
  ``devenus transition`` has applied the proposals in the evidence of another arm's run (same seed),
  as ``devenus lifecycle`` does between rounds. The runner runs the source arm first, writes D(1) and its
  manifest under ``<results>/transitions/`` (kept with the results: what changed, and why, stays
  auditable), and records the transition's counts and, on the testbed, its precision and recall.
- **Start-up.** With ``shared_ray`` the runner starts one Ray head for the whole sweep
  (:class:`devenus.runs.ray_head.RayHead`) and every run attaches to it, so no run starts its own
  GCS/raylet; verl still builds its worker processes per trainer. Each record keeps ``startup_s`` (launch to the end of the
  first step, minus that step's own time), so the saving is measured, not assumed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Callable, ClassVar, Iterable, Mapping, Sequence

from devenus.experiments.mechanism import arm_mechanism, run_mechanism
from devenus.experiments.provenance import (Mixing, check_one_version, code_id, code_label, code_version,
                                            file_hashes, runs_text, version_groups, weights_id)
from devenus.experiments.stats import Interval, mean_interval, paired_over_questions, paired_over_seeds
from devenus.atomic import commit_temp, write_text_atomic
from devenus.runs.ray_head import RayHead

BASE = "base"
AGGREGATES = ("ID", "near-OOD", "far-OOD")
SUPERSEDED = "superseded"  # finished results a rerun replaced, kept beside the live ones by reason
SIDE_GROUPS = {"test_id": "ID", "test_id_extra": "ID", "near_ood": "near-OOD", "test_ood": "far-OOD"}


@dataclass(frozen=True)
class Transition:
    """Train on D(1): the seed's training data with the proposals of arm ``source``'s run (its evidence
    table) applied by ``devenus transition --rule RULE`` (``correct``: NL-OLR v2, ``promote``: TraPO v2)."""

    source: str
    rule: str
    thresholds: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Arm:
    """One configuration of an experiment. ``baseline`` names the arm it is compared with (same seed)."""

    name: str
    method: str = "grpo"
    labeled_fraction: float = 1.0
    method_config: Mapping = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    baseline: str = BASE
    claimed_side: int = 1  # the sign the claim expects for arm - baseline (for the verdict)
    transition: Transition | None = None  # train on D(1) derived from another arm's evidence (same seed)


# ------------------------------------------------------------------------------ training data
def epoch_steps(epochs: float, rows: int, prompts_per_step: int) -> int:
    """Steps for ``epochs`` passes over ``rows`` training rows at ``prompts_per_step`` a step:
    ceil(epochs x rows / prompts_per_step), so every row is offered at least ``epochs`` times in expectation
    (verl's loader drops each pass's last partial batch and reshuffles; the ceiling makes up for it). A file
    smaller than one step's batch cannot train at all and is refused."""
    if rows < prompts_per_step:
        raise ValueError(f"{rows} training rows cannot fill one step of {prompts_per_step} prompts")
    # rounded first: 0.3 x 10 is 3.0000000000000004 in floating point, and one step more is not an epoch more
    return math.ceil(round(epochs * rows / prompts_per_step, 9))


# ------------------------------------------------------------------------------ validation data
def validation_files(tb) -> dict[str, Path]:
    """Every held-out file a run validates on, keyed by split name."""
    from devenus.testbed.near_ood import build_heldout

    extra = build_heldout(tb)
    return {"test_id": tb.split("test_id"), "test_id_extra": extra["test_id_extra"],
            "near_ood": extra["near_ood"], "test_ood": tb.split("test_ood")}


def question_groups(files: Mapping[str, Path]) -> dict[str, str]:
    """Question text (the prompt's last user turn, as the validation dump gives it back) -> group (``ID``,
    ``near-OOD/<family>``, ``far-OOD/<family>``)."""
    from devenus.evaluate.compare import last_user_turn
    from devenus.records import read_records

    out = {}
    for split, path in files.items():
        side = SIDE_GROUPS[split]
        for r in read_records(path):
            q = last_user_turn(r)
            out[q] = side if side == "ID" else f"{side}/{r['extra_info']['family']}"
    return out


def per_question_scores(dump: Path, groups: Mapping[str, str]) -> tuple[dict[str, dict[str, float]], int]:
    """From one ``<step>.jsonl`` validation dump: group -> {question: mean score}, and samples per question.
    Aggregates (``near-OOD``, ``far-OOD``) hold their families' questions too."""
    from devenus.runs.logs import scores_per_question

    scores = scores_per_question(dump)
    out: dict[str, dict[str, float]] = {}
    for q, s in scores.items():
        g = groups.get(q)
        if g is None:
            continue
        mean = sum(s) / len(s)
        out.setdefault(g, {})[q] = mean
        if "/" in g:
            out.setdefault(g.split("/")[0], {})[q] = mean
    return out, max((len(s) for s in scores.values()), default=0)


# ------------------------------------------------------------------------------ the experiment
#: (arm, seed, experiment) -> the arm's training records (Parquet), or None for the testbed's train split;
#: data it builds goes under ``experiment.work``, a record of how it was built beside ``experiment.results``
TrainFile = Callable[[Arm, int, "Experiment"], "Path | None"]


@dataclass
class Experiment:
    name: str
    arms: Sequence[Arm]
    budget: Mapping  # RunConfig fields shared by every arm (steps, lr, val_n, ...)
    results: Path  # one JSON per (arm, seed); the table beside it
    work: Path = Path("outputs/experiments")
    train_file: TrainFile | None = None  # (arm, seed, experiment) -> Parquet; None: the testbed's train split
    testbed_config: object = None
    run_timeout_s: float | None = None
    log: Callable[[str], None] = print
    validation: Mapping[str, Path] | None = None  # split name (a key of SIDE_GROUPS) -> file; default: all four
    mixing: Mixing = Mixing()  # what a table may mix (nothing, unless told)
    # the base model: the testbed's, or a model name / folder (``devenus model list``; e.g. ``smollm2``), which
    # then needs its own ``train_file`` and ``validation`` (the testbed's splits belong to the testbed's model)
    model: str = "testbed"

    def __post_init__(self) -> None:
        self.results, self.work = Path(self.results), Path(self.work)
        if self.model != "testbed" and (self.validation is None or self.train_file is None):
            raise ValueError(f"experiment {self.name!r} on model {self.model!r} names its train_file and validation")
        if self.validation is not None and set(self.validation) - set(SIDE_GROUPS):
            raise ValueError(f"validation splits must be among {sorted(SIDE_GROUPS)}: {sorted(self.validation)}")
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names) or BASE in names:
            raise ValueError(f"arm names must be unique and not {BASE!r}: {names}")
        for a in self.arms:
            if a.baseline != BASE and a.baseline not in names:
                raise ValueError(f"arm {a.name!r}: baseline {a.baseline!r} is not an arm")
            if a.transition is not None:
                _check_transition(a, {b.name: b for b in self.arms})
        self._transitions: dict[tuple[str, int], dict] = {}
        self._stopping = threading.Event()

    # ---- identity and resume
    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name) if name != BASE else Arm(BASE)

    def fingerprint(self, arm: Arm) -> str:
        """What a result depends on (besides the seed): the arm, the budget and the validation sets."""
        from devenus.testbed.near_ood import VERSION

        val = sorted(self._validation_id(p) for p in self.validation.values()) if self.validation else None
        a = asdict(arm) if arm.name != BASE else BASE
        if a != BASE and a["transition"] is None:
            del a["transition"]  # a one-round arm hashes as it did before two-round arms existed (results kept)
        blob = {"arm": a, "budget": dict(self.budget), "heldout": VERSION,
                "validation": val}
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def _validation_id(self, path) -> str:
        """A held-out file in a fingerprint, named so that the same run from another checkout, working
        directory or home is the same run: one the experiment writes into its work folder within it, one the
        testbed keeps in its cache as ``$DEVENUS_CACHE/<within the cache>``, any other by its path."""
        from devenus.testbed import default_cache_dir

        resolved = Path(path).resolve()
        for root, prefix in ((self.work, ""), (default_cache_dir(), "$DEVENUS_CACHE/")):
            try:
                return prefix + str(resolved.relative_to(Path(root).resolve()))
            except ValueError:
                continue
        return str(path)

    def _once(self, attr: str, make: Callable[[], object]):
        """``self.<attr>``, made by ``make()`` the first time it is asked for (or set beforehand, as tests do)."""
        if getattr(self, attr, None) is None:
            setattr(self, attr, make())
        return getattr(self, attr)

    def base_model_id(self) -> str:
        """A hash of the base model's weights. The testbed's build key names its recipe, not its weights:
        SFT on another CPU gives other weights under the same key (docs/testbed.md), so a result is reused
        or paired only with results of the same weights."""
        from devenus.testbed.shipped import model_hash

        return self._once("_base_model_id", lambda: model_hash(self.model_dir()))

    def model_dir(self) -> str:
        """The base model's folder (resolved once)."""
        from devenus.sources import resolve_model

        return self._once("_model_dir", lambda: str(self._testbed().model_dir if self.model == "testbed"
                                                    else resolve_model(self.model)))

    def code_version(self) -> dict:
        """The package's code version (:func:`~devenus.experiments.provenance.code_version`), computed once
        per experiment: every result of one sweep records the code the sweep started with."""
        return self._once("_code", code_version)

    def validation_hashes(self) -> dict[str, dict]:
        return self._once("_validation_hashes", lambda: file_hashes(self.validation_files()))

    def result_path(self, name: str, seed: int) -> Path:
        return self.results / f"{name}_s{seed}.json"

    def done(self, name: str, seed: int) -> bool:
        p = self.result_path(name, seed)
        if not p.exists():
            return False
        try:
            r = json.loads(p.read_text())
        except json.JSONDecodeError:
            return False
        return (r.get("returncode") == 0 and bool(r.get("per_question")) and r.get("fingerprint") == self.fingerprint(self.arm(name))
                and r.get("base_model") == self.base_model_id())  # a result of other weights is rerun, never reused

    def _save(self, name: str, seed: int, record: dict) -> dict:
        self.results.mkdir(parents=True, exist_ok=True)
        path = self.result_path(name, seed)
        self._supersede(path, record)
        write_text_atomic(path, json.dumps(record, indent=1))  # a kill never leaves half a result
        return record

    def _supersede(self, path: Path, record: dict) -> None:
        """A finished result is never overwritten: the one at ``path`` moves to ``superseded/<reason>/``
        (out of the report's reach, not lost) before ``record`` takes its place. The reason is the first
        that holds of ``weights`` (other or unrecorded base-model weights), ``config`` (another
        fingerprint), ``code`` (another code version) and ``rerun`` (the same run, forced again). A failed
        or unreadable result holds nothing to keep and is replaced."""
        try:
            old = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return
        if old.get("returncode") != 0:
            return
        reason = ("weights" if weights_id(old) != weights_id(record) else
                  "config" if old.get("fingerprint") != record.get("fingerprint") else
                  "code" if code_id(old) != code_id(record) else "rerun")
        stem = f"{path.stem}.{weights_id(old)[:16]}.{code_id(old)}"
        dest, n = self.results / SUPERSEDED / reason / f"{stem}.json", 1
        while dest.exists():  # a second rerun of the same run keeps both earlier ones
            n += 1
            dest = dest.with_name(f"{stem}.{n}.json")
        dest.parent.mkdir(parents=True, exist_ok=True)
        commit_temp(path, dest)  # the tree's one rename (devenus.atomic), directory synced
        self.log(f"[runner] {path.name} superseded ({reason}; weights {weights_id(old)}, code {code_label(old)}): "
                 f"kept as {dest.relative_to(self.results)}")

    # ---- one run
    def validation_files(self) -> dict[str, Path]:
        return {k: Path(v) for k, v in self.validation.items()} if self.validation else validation_files(self._testbed())

    def _testbed(self):
        """The testbed (None for an experiment on another model)."""
        if self.model != "testbed":
            return None
        from devenus.testbed import build_testbed

        return build_testbed(self.testbed_config)

    # ---- two-round arms
    def run_dir(self, name: str, seed: int) -> Path:
        return self.work / self.name / f"{name}_s{seed}"

    def evidence_dir(self, name: str, seed: int) -> Path:
        from devenus.runs.testbed import evidence_dir

        return evidence_dir(self.run_dir(name, seed))

    def transition_path(self, name: str, seed: int) -> Path:
        return self.results / "transitions" / f"{name}_s{seed}.parquet"

    def source_data(self, arm: Arm, seed: int) -> Path:
        """D(0) of a two-round arm: what its source arm trained on."""
        src = self.arm(arm.transition.source)
        if self.train_file is not None:
            return Path(self.train_file(src, seed, self))
        return Path(self._testbed().split("train"))

    def build_transition(self, name: str, seed: int) -> dict:
        """D(1) of a two-round arm from its source run's evidence (deterministic: a rebuild is byte-identical)."""
        from devenus.transitions.build import build_transition

        arm = self.arm(name)
        t = arm.transition
        out = self.transition_path(name, seed)
        out.parent.mkdir(parents=True, exist_ok=True)
        r = build_transition(self.source_data(arm, seed), self.evidence_dir(t.source, seed), out, t.rule,
                             round=0, thresholds=dict(t.thresholds), force=out.exists())
        summary = {"source": t.source, "rule": t.rule, "proposals": r.proposals, "accepted": r.accepted,
                   "rejected": r.rejected, "precision": r.precision, "recall": r.recall,
                   "data": os.path.relpath(out, self.results), "sha256": r.manifest.output["sha256"]}
        self._transitions[(name, seed)] = summary
        return summary

    def train_data(self, arm: Arm, seed: int) -> Path | None:
        """The file ``arm`` trains on for ``seed`` (built first if missing); None: the testbed's train split
        (or nothing, for the testbed's validation-only ``base``)."""
        if arm.transition is not None:
            return self.transition_path(arm.name, seed)
        if self.model != "testbed":  # no testbed split to fall back on: a validation-only run names one too
            return Path(self.train_file(arm if arm.name != BASE else self.arms[0], seed, self))
        return None if arm.name == BASE or self.train_file is None else Path(self.train_file(arm, seed, self))

    def train_steps(self, arm: Arm, seed: int) -> tuple[int, int | None]:
        """``(steps, rows)``: the steps ``arm`` trains for ``seed`` and the rows of its training file. Without
        ``epochs`` in the budget every arm trains ``steps`` (rows None); with it, :func:`epoch_steps` of the
        arm's own file, refused (one line) above ``steps``, the most an arm may take."""
        epochs = self.budget.get("epochs")
        if epochs is None or arm.name == BASE:
            return self.budget["steps"], None
        data = self.train_data(arm, seed) or self._testbed().split("train")
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(str(data)).metadata.num_rows
        steps = epoch_steps(epochs, rows, self.budget["prompts_per_step"])
        if steps > self.budget["steps"]:
            raise ValueError(f"experiment {self.name!r}, arm {arm.name!r} seed {seed}: {epochs:g} epochs of its {rows} "
                             f"rows need {steps} steps, over the budget's steps {self.budget['steps']} (the most an "
                             f"arm may take)")
        return steps, rows

    def run_config(self, arm: Arm, seed: int, out: Path, extra: Sequence[str] = ()):
        from devenus.runs.testbed import RunConfig

        data = self.train_data(arm, seed)
        budget = {k: v for k, v in self.budget.items() if k != "epochs"}  # not a run's key: it sets the steps
        budget["steps"] = self.train_steps(arm, seed)[0]
        model = {} if self.model == "testbed" else {"model_dir": self.model_dir()}
        own = [f"+devenus.method_config.{k}={v}" for k, v in arm.method_config.items()]
        own += [f"trainer.project_name=devenus_{self.name}", f"trainer.experiment_name={arm.name}_s{seed}"]
        # the train file absolute: runs join a shared Ray head, whose workers have no working directory
        return RunConfig(**budget, **model, seed=seed, method=arm.method, train_file=str(Path(data).resolve()) if data else None,
                         val_files=tuple(str(p) for p in self.validation_files().values()),
                         val_before_train=arm.name == BASE, val_only=arm.name == BASE,
                         extra_overrides=tuple(own) + tuple(arm.overrides) + tuple(extra)
                         + (f"hydra.run.dir={(out / 'hydra').resolve()}",))  # the trainer's config lands there

    #: what runs: ``python <entry> <overrides>`` (the verl trainer; a test swaps in a stand-in)
    entry: ClassVar[tuple[str, ...]] = ("-m", "devenus.train")

    def command(self, tb, out: Path, cfg) -> list[str]:
        """The run's overrides (the testbed's recipe sized by ``cfg``)."""
        from devenus.runs.testbed import overrides

        return overrides(tb, out.resolve(), cfg)

    def run_one(self, name: str, seed: int, ray: RayHead | None = None) -> dict:
        """Train (or, for ``base``, only validate) one (arm, seed) through ``python -m devenus.train``."""
        from devenus.runs import launch

        arm = self.arm(name)
        out = self.run_dir(name, seed)
        if out.exists():
            shutil.rmtree(out)  # a killed run restarts from scratch: nothing of it is trusted
        out.mkdir(parents=True)
        tb = self._testbed()
        cfg = self.run_config(arm, seed, out, ray.overrides() if ray else ())
        command = self.command(tb, out, cfg)
        r = launch(command, out, timeout_s=self.run_timeout_s, env=ray.env({}) if ray else None,
                   stop=self._stopping, entry=self.entry)
        rc, metrics, first_metrics = r.returncode, r.metrics, r.first_metrics_s
        dumps = [r.validation[s_] for s_ in sorted(r.validation)]
        groups = question_groups(self.validation_files()) if dumps else {}
        per_q, k = per_question_scores(dumps[-1], groups) if dumps else ({}, 0)
        # every validation point (trainer.test_freq), not only the last: accuracy against training progress
        val_curve = [{"step": s_, **{g: sum(v.values()) / len(v)
                                     for g, v in per_question_scores(r.validation[s_], groups)[0].items()}}
                     for s_ in sorted(r.validation)]
        step1 = next((m for m in metrics if m["step"] == 1), None)
        startup = (first_metrics - step1["timing_s/step"]) if (first_metrics and step1 and "timing_s/step" in step1) else None
        curves = training_curves(metrics)
        record = {
            "experiment": self.name, "name": name, "seed": seed, "arm": asdict(arm), "budget": dict(self.budget),
            "fingerprint": self.fingerprint(arm), "base_model": self.base_model_id(), "returncode": rc, "wall_s": round(r.wall_s, 1),
            "startup_s": None if startup is None else round(startup, 1), "shared_ray": ray is not None,
            "final_step": int(dumps[-1].stem) if dumps else None, "val_samples": k,
            "accuracy": {g: sum(s.values()) / len(s) for g, s in per_q.items()},
            "per_question": per_q, "val_metrics": {k2: v for m in metrics for k2, v in m.items() if k2.startswith("val-")},
            "curves": curves, "val_curve": val_curve, "log": str(r.log), "mechanism": run_mechanism(curves),
            **({"transition": self._transitions.get((name, seed))} if arm.transition is not None else {}),
            # equal epochs: the rows the arm's steps were counted from (its steps: config.run.steps)
            **({"epochs": {"epochs": self.budget["epochs"], "rows": self.train_steps(arm, seed)[1], "steps": cfg.steps}}
               if self.budget.get("epochs") is not None and name != BASE else {}),
            "code": self.code_version(), "data": self.data_hashes(tb, cfg),
            # the run's fields, the exact overrides it was launched with, and the trainer's own composed
            # config (Hydra's, in the run dir; None when the run wrote none)
            "config": {"run": asdict(cfg) if is_dataclass(cfg) else None, "overrides": list(command),
                       "trainer": trainer_config(out)},
        }
        return self._save(name, seed, record)

    def data_hashes(self, tb, cfg) -> dict:
        """sha256 of the run's training file (None for a validation-only run) and of each validation file."""
        train = None if cfg is None or cfg.val_only else (cfg.train_file or tb.split("train"))
        return {"train": file_hashes({"train": train})["train"] if train else None,
                "validation": self.validation_hashes()}

    def stop(self) -> None:
        """Stop every run in flight (each launch kills its own process group when it sees this)."""
        self._stopping.set()

    # ---- a sweep
    def plan(self, seeds: Iterable[int], names: Sequence[str] | None = None, force: bool = False) -> list[tuple[str, int]]:
        wanted = list(names) if names else [a.name for a in self.arms]
        unknown = sorted(set(wanted) - {a.name for a in self.arms} - {BASE})
        if unknown:
            raise ValueError(f"unknown arm(s) {unknown}; arms: {[a.name for a in self.arms]}")
        todo = []
        for seed in seeds:
            need = {BASE} | set(wanted)
            need |= {self.arm(n).baseline for n in need}  # every arm's comparison needs its baseline of the same seed
            for t in [self.arm(n).transition for n in need]:  # a two-round arm needs its source's run and baseline
                if t is not None:
                    need |= {t.source, self.arm(t.source).baseline}
            rerun = set()  # a source whose evidence is gone (another machine, a cleaned work dir) runs again
            for n in need:
                t = self.arm(n).transition
                if t is not None and (force or not self.done(n, seed)) and not self.evidence_dir(t.source, seed).exists():
                    rerun.add(t.source)
            for n in [BASE] + [a.name for a in self.arms]:
                if n in need and (force or n in rerun or not self.done(n, seed)):
                    todo.append((n, seed))
        return todo

    def run(self, seeds: Iterable[int], names: Sequence[str] | None = None, jobs: int = 1, force: bool = False,
            shared_ray: bool = True) -> list[dict]:
        self._stopping.clear()
        self.code_version()  # once, before any run: the code this sweep runs
        todo = self.plan(list(seeds), names, force)
        self.log(f"[{self.name}] {len(todo)} runs to do, {jobs} at a time, "
                 f"{'one shared Ray head' if shared_ray else 'a Ray start-up per run'}")
        if not todo:
            return []
        # refused now, not after hours of runs: would the table of what is kept plus what runs mix versions?
        kept = {k: r for k, r in self.records().items() if k not in set(todo)}
        will = {k: {"code": self.code_version(), "base_model": self.base_model_id()} for k in todo}
        check_one_version({**self.finished(kept), **will}, self.mixing, self.name)
        for name, seed in todo:  # data first, in this thread, so parallel runs never write one file
            arm = self.arm(name)
            if arm.transition is not None:
                self.source_data(arm, seed)  # D(0); its D(1) is built once the source has run
            elif name != BASE:
                self.train_data(arm, seed)
                self.train_steps(arm, seed)  # with epochs: a run over the budget's steps is refused now
        self.validation_files()  # built before any run starts
        t0 = time.perf_counter()
        previous = None
        if threading.current_thread() is threading.main_thread():  # SIGTERM unwinds like Ctrl-C: runs are stopped
            previous = signal.signal(signal.SIGTERM, _raise_exit)
        try:
            if shared_ray:
                from devenus.adapters.verl.cpu.launch import cpu_launch_env

                (self.work / self.name).mkdir(parents=True, exist_ok=True)
                with RayHead(max(1, jobs), cpu_launch_env(), log=self.work / self.name / "ray_head.log") as ray:
                    self.log(f"[{self.name}] Ray head at {ray.address} up in {ray.start_s:.1f}s")
                    results = self._sweep(todo, jobs, ray, t0)
            else:
                results = self._sweep(todo, jobs, None, t0)
        except BaseException:
            self.stop()
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        self.log(f"[{self.name}] {len(results)} runs in {(time.perf_counter() - t0) / 60:.1f} min; "
                 f"{sum(r['returncode'] != 0 for r in results)} failed")
        return results

    def _sweep(self, todo: Sequence[tuple[str, int]], jobs: int, ray: RayHead | None, t0: float) -> list[dict]:
        """The runs of ``todo``, ``jobs`` at a time, in two waves: a two-round arm's data (D(1)) exists only
        once its source's run has written evidence."""
        results = []
        for two_round in (False, True):
            wave = [j for j in todo if (self.arm(j[0]).transition is not None) == two_round]
            for name, seed in (wave if two_round else ()):  # D(1) before its runs
                s = self.build_transition(name, seed)
                self.log(f"[{self.name}] {name} s{seed}: D(1) from {s['source']}'s evidence, rule {s['rule']}: "
                         f"{s['accepted']} of {s['proposals']} proposed rows changed")
            pool = ThreadPoolExecutor(max_workers=max(1, jobs))
            try:
                results += list(pool.map(lambda job: self._run_logged(*job, ray, t0), wave))
            except BaseException:
                self.stop()  # before waiting for the threads: they wait for their runs
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return results

    def _run_logged(self, name: str, seed: int, ray: RayHead | None, t0: float) -> dict:
        r = self.run_one(name, seed, ray)
        acc = " ".join(f"{g}={r['accuracy'].get(g, float('nan')):.3f}" for g in AGGREGATES)
        # a validation-only run has no step 1 to measure its start-up against
        startup = "start-up -" if r["startup_s"] is None else f"start-up {r['startup_s']}s"
        self.log(f"[{self.name}] {name} s{seed}: rc={r['returncode']} {r['wall_s']:.0f}s "
                 f"{startup} {acc} ({(time.perf_counter() - t0) / 60:.1f} min in)")
        return r

    # ---- the analysis
    def records(self) -> dict[tuple[str, int], dict]:
        out = {}
        for p in sorted(self.results.glob("*_s*.json")):
            r = json.loads(p.read_text())
            if r.get("experiment") == self.name:
                out[(r["name"], r["seed"])] = r
        return out

    def finished(self, records: Mapping | None = None) -> dict[tuple[str, int], dict]:
        """The results a table is made of: finished, with validation scores, of this configuration; refused
        (:class:`~devenus.experiments.provenance.MixedResults`) when they span code versions or weights
        that ``mixing`` does not allow."""
        recs = self.records() if records is None else records
        names = {BASE} | {a.name for a in self.arms}
        ok = {key: r for key, r in recs.items() if r["returncode"] == 0 and r.get("per_question")
              and key[0] in names and r.get("fingerprint") == self.fingerprint(self.arm(key[0]))}
        check_one_version(ok, self.mixing, self.name)
        return ok

    def comparisons(self, records: Mapping | None = None) -> dict[str, dict]:
        """For each arm: seeds, mean accuracy per group, and arm - baseline per group, paired over seeds
        (Student t over seeds; with one seed, paired over questions instead, labelled as such)."""
        recs = self.records() if records is None else records
        ok = self.finished(recs)
        out: dict[str, dict] = {}
        for arm in [Arm(BASE)] + list(self.arms):
            runs = {seed: r for (n, seed), r in ok.items() if n == arm.name}
            failed = sum(1 for (n, _), r in recs.items() if n == arm.name and (n, _) not in ok)
            row: dict = {"seeds": sorted(runs), "failed": failed, "baseline": arm.baseline if arm.name != BASE else None}
            if runs:
                row["accuracy"] = {g: mean_interval([r["accuracy"][g] for r in runs.values()]).to_dict()
                                   for g in AGGREGATES if all(g in r["accuracy"] for r in runs.values())}
                row["wall_s"] = sum(r["wall_s"] for r in runs.values())
                row["startup_s"] = [r["startup_s"] for r in runs.values() if r.get("startup_s") is not None]
                pl = [_last_mean(r["curves"], "devenus/target/accuracy") for r in runs.values()]
                row["pseudo_label_acc"] = None if any(v is None for v in pl) else sum(pl) / len(pl)
                mech = arm_mechanism({seed: _mechanism(r) for seed, r in runs.items()})
                if mech:
                    row["mechanism"] = mech
            if arm.name != BASE and runs:
                for label, ref in (("vs_base", BASE), ("vs_baseline", arm.baseline)):
                    if label == "vs_baseline" and ref == BASE:
                        continue
                    refs = {seed: r for (n, seed), r in ok.items() if n == ref}
                    row[label] = {"ref": ref, **self._paired(runs, refs)}
                    if label == "vs_baseline" and row[label].get("by") == "seeds" and "ID" in row[label]:
                        d = row[label]["ID"]  # the specs' decision: over seeds, on the claimed side
                        row[label]["verdict_ID"] = Interval(d["mean"], d["half_width"], d["n"], d["level"]).verdict(arm.claimed_side)
            out[arm.name] = row
        return out

    @staticmethod
    def _paired(runs: Mapping[int, dict], refs: Mapping[int, dict]) -> dict:
        common = sorted(set(runs) & set(refs))
        # a seed pairs only where both runs trained the same weights (results older than the field pair
        # with each other: both None)
        seeds = [s for s in common if runs[s].get("base_model") == refs[s].get("base_model")]
        other = [s for s in common if s not in seeds]
        if not seeds:
            return {"seeds": [], "by": None, **({"other_base_model": other} if other else {})}
        res: dict = {"seeds": seeds, **({"other_base_model": other} if other else {})}
        if len(seeds) >= 2:
            res["by"] = "seeds"
            for g in AGGREGATES:
                a = {s: runs[s]["accuracy"][g] for s in seeds if g in runs[s]["accuracy"]}
                b = {s: refs[s]["accuracy"][g] for s in seeds if g in refs[s]["accuracy"]}
                if len(set(a) & set(b)) >= 1:
                    res[g] = paired_over_seeds(a, b).to_dict()
        else:
            res["by"] = "questions (one seed: evaluation noise only)"
            s = seeds[0]
            for g in AGGREGATES:
                a, b = runs[s]["per_question"].get(g), refs[s]["per_question"].get(g)
                if a and b:
                    res[g] = paired_over_questions(a, b).to_dict()
        return res

    def report(self, write: bool = True) -> str:
        recs = self.records()
        comp = self.comparisons(recs)
        finished = self.finished(recs)
        seeds = sorted({s for (_, s) in recs})
        head = ["arm", "seeds"] + [f"{g}" for g in AGGREGATES] + [f"Δ{g} vs base" for g in AGGREGATES] + \
               ["vs", *(f"Δ{g} vs baseline" for g in AGGREGATES), "ID interval vs 0 (per arm, before Holm)", "pseudo-label acc (last 5)", "failed"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        bys = set()
        for name, row in comp.items():
            n = len(row["seeds"])
            weights = {finished[(name, sd)].get("base_model") for sd in row["seeds"]}
            # a mean over runs of several base models is marked as such: it is not one model's accuracy
            cells = [name, str(n) + (f" ({len(weights)} weights: mixed)" if len(weights) > 1 else "")]
            acc = row.get("accuracy", {})
            cells += [_fmt(acc.get(g), signed=False, n=n) for g in AGGREGATES]
            for label in ("vs_base", "vs_baseline"):
                p = row.get(label)
                if label == "vs_baseline":
                    cells.append(p["ref"] if p else "-")
                if p and p.get("by"):
                    bys.add(p["by"])
                cells += [_fmt(p.get(g), n=n) if p else "-" for g in AGGREGATES]
            cells.append((row.get("vs_baseline") or {}).get("verdict_ID", "-"))
            pl = row.get("pseudo_label_acc")
            cells += ["-" if pl is None else f"{pl:.3f}", str(row["failed"])]
            lines.append("| " + " | ".join(cells) + " |")
        ok = [r for r in recs.values() if r["returncode"] == 0]
        startups = [r["startup_s"] for r in ok if r.get("startup_s") is not None]
        val = next((r for r in ok if r.get("per_question")), None)
        sizes = ", ".join(f"{g} {len(val['per_question'][g])}" for g in AGGREGATES if val and g in val["per_question"])
        header = (
            f"{self.name}: {self.model}, verl on the CPU; seeds {seeds}; budget {json.dumps(dict(self.budget), sort_keys=True)}.\n"
            f"Accuracy: verl's validation after the last step, sampled T=1, avg@{val['val_samples'] if val else '?'} "
            f"per question ({sizes} questions); mean over seeds ± 95% Student-t half-width.\n"
            f"Δ columns: arm minus the named run of the same seed, paired by {' / '.join(sorted(bys)) or '-'}; "
            f"± is the 95% Student-t half-width; (n=k): a cell resting on k runs, fewer than its row's seeds.\n"
            f"{len(ok)} runs, {sum(r['wall_s'] for r in ok) / 60:.0f} min of run time"
            + (f"; start-up (launch to the end of step 1, minus step 1) median {sorted(startups)[len(startups) // 2]:.0f} s" if startups else "")
            + ".\n" + _provenance_lines(finished) + "\n")
        table = header + "\n".join(lines) + "\n" + _mechanism_table(comp)
        if write:
            self.results.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.results.parent / f"{self.name}.md", table)
            write_text_atomic(self.results.parent / f"{self.name}.json", json.dumps(comp, indent=1))
            if importlib.util.find_spec("matplotlib") is not None:  # the plot extra; without it the table is the report
                from devenus.experiments.plot import plot_differences

                plot_differences(self.name, comp, finished, self.results.parent / f"{self.name}.png")
        return table


def training_curves(metrics: Sequence[Mapping]) -> list[dict]:
    """The per-step training metrics a result keeps (steps >= 1; verl's file-tracker rows as
    :func:`devenus.runs.logs.read_metrics` returns them): DE-Venus's own and a few of verl's."""
    return [{k: v for k, v in m.items() if k == "step" or k.startswith(
        ("devenus/", "critic/score/mean", "response_length/mean", "actor/entropy", "timing_s/step"))}
        for m in metrics if m["step"] > 0]


def _mechanism(record: Mapping) -> dict[str, dict]:
    """A result's run mechanism metrics (computed from its curves for results written before the field)."""
    m = record.get("mechanism")
    return run_mechanism(record.get("curves") or []) if m is None else m


def _mechanism_table(comp: Mapping[str, dict]) -> str:
    """Per arm and mechanism metric: the run ratio's mean over seeds ± 95% half-width, and the pooled
    counts; empty when no arm logged one."""
    rows = [(name, key, m) for name, row in comp.items() for key, m in sorted(row.get("mechanism", {}).items())]
    if not rows:
        return ""
    lines = ["", "Mechanism metrics (against the simulation's hidden truth): per run, summed numerators over summed "
             "denominators across its steps; mean over seeds ± 95% Student-t half-width; pooled = every run's "
             "numerators over every run's denominators.", "",
             "| arm | metric | seeds | per run, over seeds | pooled | numerator / denominator |", "|---|---|---|---|---|---|"]
    for name, key, m in rows:
        metric = key.removeprefix("devenus/mechanism/").removeprefix("devenus/")
        lines.append(f"| {name} | {metric} | {len(m['seeds'])} | {_fmt(m, signed=False)} | {m['pooled']:.3f} | "
                     f"{m['num']:g} / {m['den']:g} |")
    return "\n".join(lines) + "\n"


def _provenance_lines(records: Mapping[tuple[str, int], dict]) -> str:
    """Header lines naming the code version and the base-model weights of the results; where they hold more
    than one (allowed by :class:`Mixing`), each with its runs."""
    out = []
    for what, ident, label, note in (
            ("Code", code_id, code_label, "Differences pair runs of different code versions where a seed has them."),
            ("Base-model weights", weights_id, weights_id, "Each difference pairs runs of one seed on the same "
             "weights; the means and the interval over seeds span every set.")):
        groups = version_groups(records, ident)
        if len(groups) == 1:
            out.append(f"{what}: {label(records[next(iter(groups.values()))[0]])}.")
        elif groups:
            parts = "; ".join(f"{label(records[keys[0]])} ({runs_text(keys)})" for keys in groups.values())
            out.append(f"{what}: {parts}. {note}")
    return "".join(line + "\n" for line in out)


def trainer_config(run_dir: Path) -> dict | None:
    """The trainer's composed config, from Hydra's copy in ``<run dir>/hydra/.hydra`` (``hydra.run.dir``),
    interpolations resolved where they resolve outside the trainer; None when the run wrote none."""
    path = Path(run_dir) / "hydra" / ".hydra" / "config.yaml"
    if not path.exists():
        return None
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from devenus.config import load_file

    cfg = OmegaConf.create(load_file(path))
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException:
        return OmegaConf.to_container(cfg, resolve=False)


def _check_transition(arm: Arm, arms: Mapping[str, Arm]) -> None:
    from devenus.transitions.rules import TransitionError, get, rule_config

    t = arm.transition
    src = arms.get(t.source)
    if src is None or t.source == arm.name:
        raise ValueError(f"arm {arm.name!r}: transition source {t.source!r} is not another arm")
    if src.transition is not None:
        raise ValueError(f"arm {arm.name!r}: its source {t.source!r} is itself a two-round arm (one round of "
                         f"transition per arm)")
    try:
        rule_config(t.rule, dict(t.thresholds))
    except TransitionError as e:
        raise ValueError(f"arm {arm.name!r}: {e}") from None
    if src.method != get(t.rule).method:
        raise ValueError(f"arm {arm.name!r}: rule {t.rule!r} applies {get(t.rule).method}'s proposals, but the "
                         f"source arm {t.source!r} trains {src.method}")


def _fmt(d: dict | None, signed: bool = True, n: int | None = None) -> str:
    """The cell of an interval; ``(n=k)`` after it when it rests on fewer runs than its row's seeds
    (a paired difference only pairs seeds on the same weights)."""
    if not d:
        return "-"
    cell = Interval(d["mean"], d["half_width"], d["n"], d["level"]).fmt(signed)
    return cell if n is None or d["n"] == n else f"{cell} (n={d['n']})"


def _raise_exit(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _last_mean(curves: Sequence[dict], key: str, last: int = 5) -> float | None:
    vals = [c[key] for c in curves if key in c and c[key] is not None and not (isinstance(c[key], float) and math.isnan(c[key]))]
    return sum(vals[-last:]) / len(vals[-last:]) if vals else None
