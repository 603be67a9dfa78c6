"""A registered experiment: what ``devenus experiment NAME --quick|--full|--report`` runs.

A :class:`Definition` names the experiment's arms, its :class:`Budget` (the run sizes every arm shares, a
typed config), the seeds of ``--full`` and ``--quick``, named arm sets (``--arm GROUP``), how each arm's
training data and the held-out files are made, the base model, and any report pieces beyond the runner's
table. Definitions are registered in :data:`EXPERIMENTS` (lazily, by ``"module:attr"``); the shipped ones
live in :mod:`devenus.experiments.definitions`, one module each, whose docstring is the experiment's plan.

Adding one: write ``devenus/experiments/definitions/<name>.py`` ending in ``DEFINITION = Definition(...)``
and add it to :data:`BUILTIN`. See experiments/README.md, "Adding an experiment".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Mapping

from devenus.config import Config, ConfigError, option
from devenus.experiments.provenance import Mixing
from devenus.experiments.runner import BASE, Arm, Experiment, TrainFile
from devenus.registry import Registry
from devenus.runs.testbed import RunConfig

__all__ = ["BUILTIN", "Budget", "Definition", "EXPERIMENTS", "RESULTS_ROOT", "tables_report", "text_report"]

#: where results go by default, relative to the current directory: run from the checkout, they land
#: beside the committed ones (``experiments/results/<name>/``, the tables beside that folder)
RESULTS_ROOT = Path("experiments") / "results"


class BudgetError(ConfigError):
    """A budget an experiment's runs cannot start with."""


def _run_key(name: str, default=dataclasses.MISSING):
    """A :class:`Budget` key with :class:`RunConfig`'s help and bounds (one place declares a run's bounds)."""
    meta = next(f for f in dataclasses.fields(RunConfig) if f.name == name).metadata
    return option(default, meta["help"], choices=meta["choices"], ge=meta["ge"], le=meta["le"], gt=meta["gt"],
                  lt=meta["lt"])


@dataclass(frozen=True)
class Budget(Config):
    """The run sizes every arm of an experiment shares (:class:`RunConfig` keys, and ``epochs``). The six
    first are required, so a definition states its whole budget; the others are set where an experiment
    needs them (None: the run's default, and absent from :meth:`as_dict`). A result's fingerprint hashes
    :meth:`as_dict`: changing a value reruns the experiment's results, adding a key set to None does not."""

    key_path: ClassVar[str] = "budget"
    error: ClassVar[type[ConfigError]] = BudgetError

    steps: int = _run_key("steps")
    prompts_per_step: int = _run_key("prompts_per_step")
    rollouts_per_prompt: int = _run_key("rollouts_per_prompt")
    val_n: int = _run_key("val_n")
    kl_coef: float = _run_key("kl_coef")
    lr: float = _run_key("lr")
    max_response_length: int | None = _run_key("max_response_length", None)
    max_prompt_length: int | None = _run_key("max_prompt_length", None)
    micro_batch: int | None = _run_key("micro_batch", None)
    #: equal epochs (the runner's :func:`~devenus.experiments.runner.epoch_steps`): each arm trains
    #: ceil(epochs x the rows of its own training file / prompts_per_step) steps; ``steps`` is then the most
    #: an arm may take (an arm that would need more is refused before any run)
    epochs: float | None = option(None, "train each arm ceil(epochs x its training rows / prompts_per_step) steps "
                                        "(None: every arm trains `steps`; else `steps` is the most one may take)",
                                  gt=0.0)

    @classmethod
    def override(cls, key: str, value: str = "...") -> str:
        return f"Budget({key}={value})"

    def as_dict(self) -> dict:
        """The keys set, as the runner takes them (``Experiment.budget``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class Definition:
    """One experiment. ``name`` is the command's, the results folder's (``experiments/results/<name>/``)
    and every result's ``experiment`` field; ``summary`` one line for ``devenus experiment list``."""

    name: str
    summary: str
    arms: tuple[Arm, ...]
    budget: Budget
    seeds: tuple[int, ...] = (0, 1, 2)  # what --full runs
    quick_seeds: tuple[int, ...] = (0,)  # what --quick and --arm run unless --seed says
    #: named sets of arms, for ``--arm NAME``; ``quick``, if named, is what --quick runs (default: every arm)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    train_file: TrainFile | None = None  # None: the testbed's train split
    #: (work folder) -> split -> held-out file, built with the experiment; None: the testbed's four splits
    validation: Callable[[Path], Mapping[str, Path]] | None = None
    model: str = "testbed"  # ``devenus model list``; another model names train_file and validation
    jobs: int = 2  # runs side by side (two on a 2-core machine)
    run_timeout_s: float | None = 3600  # a run killed after this long is recorded as failed
    #: report pieces beyond the runner's table (written beside it); returns their text, printed after the table
    report: Callable[[Experiment], str] | None = None

    def __post_init__(self) -> None:
        names = [a.name for a in self.arms]
        if not self.name or self.name == "list":
            raise ValueError(f"an experiment needs a name other than 'list', got {self.name!r}")
        for what, seeds in (("seeds", self.seeds), ("quick_seeds", self.quick_seeds)):
            if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
                raise ValueError(f"experiment {self.name!r}: {what} must be distinct seeds >= 0, got {seeds}")
        for group, members in self.groups.items():
            unknown = sorted(set(members) - set(names) - {BASE})
            if group in names or unknown or not members:
                raise ValueError(f"experiment {self.name!r}: arm group {group!r} must name arms (not be one): "
                                 f"unknown {unknown}")

    def results_dir(self) -> Path:
        return RESULTS_ROOT / self.name

    def experiment(self, results: Path | None = None, work: Path | None = None, *, budget: Budget | None = None,
                   run_timeout_s: float | None = None, mixing: Mixing = Mixing(),
                   validation: Mapping[str, Path] | None = None) -> Experiment:
        """The runner's :class:`Experiment` (results: :meth:`results_dir`; work: ``outputs/<name>``)."""
        work = Path(work) if work is not None else Path("outputs") / self.name
        if validation is None and self.validation is not None:
            validation = self.validation(work)
        return Experiment(self.name, self.arms, (budget or self.budget).as_dict(),
                          results=Path(results) if results is not None else self.results_dir(), work=work,
                          train_file=self.train_file, validation=validation, model=self.model,
                          run_timeout_s=self.run_timeout_s if run_timeout_s is None else run_timeout_s or None,
                          mixing=mixing)

    def arm_names(self, names: str | None, quick: bool) -> list[str] | None:
        """The arms to run: ``names`` (comma-separated arms or groups), else the quick set (--quick), else
        every arm (None)."""
        if names:
            return [a for n in names.split(",") for a in self.groups.get(n, (n,))]
        if quick and "quick" in self.groups:
            return list(self.groups["quick"])
        return None

    def finished_beside(self, exp: Experiment, mixing: Mixing = Mixing()) -> dict:
        """This experiment's finished results committed beside ``exp``'s (a replication reads its pilot's):
        ``(arm, seed) -> result``; none when that folder does not exist."""
        folder = exp.results.parent / self.name
        return self.experiment(folder, mixing=mixing).finished() if folder.is_dir() else {}

    def write_report(self, exp: Experiment) -> str:
        """The runner's table (and its .json, .png) plus this experiment's own pieces; their text."""
        table = exp.report()
        return table if self.report is None else table + "\n" + self.report(exp)


def text_report(suffix: str, text: Callable[[Experiment], str]) -> Callable[[Experiment], str]:
    """A definition's ``report``: ``text(exp)`` (a markdown table, say) written atomically to
    ``<experiment>_<suffix>.md`` beside the runner's table; returns the text."""

    def report(exp: Experiment) -> str:
        from devenus.atomic import write_text_atomic

        out = text(exp)
        write_text_atomic(exp.results.parent / f"{exp.name}_{suffix}.md", out)
        return out

    return report


def tables_report(suffix: str, tables: Callable[[Experiment, dict], tuple[str, dict]],
                  plot: Callable[[dict, dict, Path], object]) -> Callable[[Experiment], str]:
    """A definition's ``report`` of tables, their numbers and a picture, from the results the runner's table is
    made of (``exp.finished()``: one code version and one set of weights unless allowed): ``tables(exp,
    records) -> (markdown, numbers)`` written atomically to ``<experiment>_<suffix>.md`` and ``.json`` beside the
    runner's table, and ``plot(records, numbers, path)`` to ``_<suffix>.png`` (only with matplotlib, the plot
    extra; without it the tables are the report); returns the markdown."""

    def report(exp: Experiment) -> str:
        import importlib.util
        import json

        from devenus.atomic import write_text_atomic

        recs = exp.finished()
        text, numbers = tables(exp, recs)
        out = exp.results.parent
        write_text_atomic(out / f"{exp.name}_{suffix}.md", text)
        write_text_atomic(out / f"{exp.name}_{suffix}.json", json.dumps(numbers, indent=1, default=str))
        if importlib.util.find_spec("matplotlib") is not None:
            plot(recs, numbers, out / f"{exp.name}_{suffix}.png")
        return text

    return report


def replication_text(name: str, recs: dict, claims, margin: float, seeds: tuple[int, ...], pilot: str,
                     pilot_recs: dict, pilot_seeds: tuple[int, ...]) -> str:
    """A confirmatory replication's claims (``(arm, reference, side)``) decided on its own ``seeds`` alone
    (paired t test and TOST at ±``margin``, Holm across them; no verdict before every seed has finished); the
    pilot's seeds and both pooled beside them as a description, not a test."""
    from devenus.experiments.stats import decide_claims, mean_interval

    def cell(diffs: list) -> str:
        if len(diffs) < 2:
            return f"{len(diffs)} seed(s)"
        return f"{mean_interval(diffs).fmt()} ({len(diffs)})"

    new = decide_claims(recs, claims, margin, min_seeds=len(seeds))
    old = {(c.arm, c.ref): c for c in decide_claims(pilot_recs, claims, margin)}
    lines = [f"{name}: the plan's claims decided on seeds {seeds[0]}-{seeds[-1]} alone (paired t test and TOST at "
             f"±{margin}, Holm across the {len(claims)} claims); the pilot ({pilot}, seeds "
             f"{min(pilot_seeds)}-{max(pilot_seeds)}) and the pooled seeds are a description, not a test.",
             "", "| claim | ΔID ± 95% (seeds), replication | p (difference) | p (TOST) | verdict | pilot | pooled (description) |",
             "|---|---|---|---|---|---|---|"]
    for c in new:
        p = old.get((c.arm, c.ref))
        pilot_diffs = p.diffs if p else []
        if c.decision is None:
            ps, verdict = "- | -", f"not read: {len(c.seeds)} of {len(seeds)} seeds finished"
        else:
            ps, verdict = f"{c.decision.p_diff:.4f} | {c.decision.p_equiv:.4f}", c.verdict
        side = {1: "+", -1: "-", 0: "="}[c.side]
        lines.append(f"| {c.arm} vs {c.ref}, {side} | {cell(c.diffs)} | {ps} | {verdict} | {cell(pilot_diffs)} | "
                     f"{cell(pilot_diffs + c.diffs)} |")
    return "\n".join(lines) + "\n"


#: the shipped experiments, in `devenus experiment list`'s order: each is imported on first use from
#: ``definitions/<module>.py``, the module named as the experiment but where :data:`_MODULE` says otherwise
_MODULE = {"weak_supervision_paired": "weak_supervision"}
BUILTIN = {name: f"devenus.experiments.definitions.{_MODULE.get(name, name)}:DEFINITION" for name in (
    "weak_supervision_paired", "label_noise", "label_noise_rho", "label_noise_confirm", "inactive_noise_confirm",
    "refine_ten_percent", "ten_percent_labels", "rollout_savings", "rollout_budget", "selection", "selection_epochs",
    "real_model", "mechanism_sweep", "refine_mechanism", "trapo_ten_percent", "trapo_confirm", "mechanism_confirm",
    "semi_confirm", "semi_paired", "semi_powered", "skip_audit", "label_free_confirm", "geomin_mechanism",
    "geomin_confirm",
)}


def _valid(name: str, entry) -> str | None:
    if not isinstance(entry, Definition):
        return f"not a Definition: {type(entry).__name__}"
    if entry.name != name:
        return f"its name is {entry.name!r}: an experiment is registered under its own name"
    return None


EXPERIMENTS: Registry[Definition] = Registry("experiment", check=_valid, lazy=BUILTIN)
