"""Active data selection with equal epochs: does TTRL on the routed subset match GRPO on the full pool with
every label, and beat the same TTRL on a random subset routed at the same budgets, when every arm trains two
epochs of its own data? The design of ``experiments/plans/selection.md`` (written before any run).

    devenus experiment selection_epochs --quick     # every arm, seed 0
    devenus experiment selection_epochs --full      # every arm, seeds 0-5
    devenus experiment selection_epochs --report    # the tables from the results on disk

- Pool: :data:`POOL` questions whose base pass rates spread around 0.5, drawn once (shared by every seed)
  from the testbed's unlabeled candidate pool (:mod:`devenus.testbed.pool`, addition of 2-6 digits) at
  :data:`CANDIDATES` questions (the default 1,024 hold about 475 questions at a mixed pass rate), stratified
  on the base model's pass rate over 8 samples at T=1 against the simulation's hidden answer
  (:func:`devenus.experiments.pool.stratified_pool`: the same count per bin 1/8..7/8, questions at 0 or 1
  only to fill). Choosing the pool by its hidden answers is the experiment designer's act, like choosing a
  task; the router never sees them (it routes on the base model's own samples), nor does any reward.
- One selection pass on the pool (``devenus.select``): 8 samples per question at T=1, scored by
  consistency and entropy, routed by ``consistency`` (the signal chosen before the old ``selection``
  experiment, on the pool's own hidden answers) with the old budgets: annotate the most uncertain 29.3%
  (150 questions), discard the least uncertain 42.1% (216), weak supervision for the rest (146).
- Arms (TTRL as in the weak-supervision experiment: 16 votes, agreement floor 0.5):
  - ``grpo_full``: the whole pool, every label (:data:`POOL` rows);
  - ``ttrl_selected``: the routed subset (the annotated rows with their label, the weak rows trained on
    TTRL's majority votes; the discarded rows are not in the file), as the old ``ttrl_routed``;
  - ``ttrl_random``: the same budgets routed by a random order (``route.seed`` = the run's seed), the same TTRL.
- Equal epochs (``Budget.epochs`` = 2): each arm trains ceil(2 x its rows / 16) steps of its own file, so
  ``grpo_full`` trains 64 steps and each subset (296 rows) 37; ``steps`` = 64 is the most an arm may take.
  Each result records its rows and steps (``epochs``), and the report each arm's rows, steps and rollouts
  generated (``devenus/rollouts/generated``: TTRL's 16 votes a prompt count, the cost).
- Claims (``experiments/power.py``, plan ``selection``, one Holm family): ``ttrl_selected`` vs ``grpo_full``
  (side +1: a null within the margin is non-inferiority) and ``ttrl_selected`` vs ``ttrl_random`` (side +1).
  The runner's table shows the second (``ttrl_selected``'s baseline); the claims table decides both.
- Budget: 16 prompts x 8 rollouts a step, lr 5e-5, KL 0.01. Held-out: 512 ID, 256 near-OOD, 256 far-OOD
  questions, T=1, 4 samples each; never trained or tuned on. Seeds 0-5 (quick: 0).

Results: one JSON per (arm, seed) under experiments/results/selection_epochs/, the table beside it, the
routing summary (counts, each decision's hidden pass rate) in selection_epochs_routes.json and the pool's
description (pass-rate bins, zero-variance share) in selection_epochs_pool.json. Nothing here has run on a GPU.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from devenus.experiments.definition import Budget, Definition, text_report
from devenus.experiments.definitions.selection import SIGNAL, TTRL, routed_train_file
from devenus.experiments.runner import BASE, Arm, Experiment
from devenus.testbed.pool import PoolConfig

NAME = "selection_epochs"
POOL = 512
#: the candidate pool the stratified pool is drawn from
CANDIDATES = PoolConfig(size=2048)
EPOCHS = 2.0
#: the old definition's budgets (the paper's routing), stated here so a change of the router's defaults
#: does not change this experiment
BUDGETS = {"route.rho_annotate": 0.293, "route.rho_discard": 0.421}
ROUTES = {
    "grpo_full": {"route.rho_annotate": 1.0, "route.rho_discard": 0.0},
    "ttrl_selected": {**BUDGETS, "route.signal": SIGNAL},
    "ttrl_random": {**BUDGETS, "route.signal": "random", "route.seed": "{seed}"},
}


def pool_file(work: Path) -> Path:
    """The stratified pool (unlabeled, as the candidate pool), written once as a dataset version under
    ``<work>/data`` (its manifest's config: the candidate pool, the pass-rate bins, the zero-variance share)."""
    path = Path(work) / "data" / f"pool{POOL}.parquet"
    if path.exists():
        return path
    from devenus.experiments.pool import stratified_pool
    from devenus.records.versions import write_version
    from devenus.testbed import build_testbed
    from devenus.testbed.pool import build_pool

    tb = build_testbed()
    candidates = build_pool(tb.config, CANDIDATES)
    rows, about = stratified_pool(NAME, tb, 0, POOL, file=candidates)  # one pool for every seed
    path.parent.mkdir(parents=True, exist_ok=True)
    write_version(rows, path, rule=NAME, parent=candidates,
                  config={"pool": POOL, "candidates": dataclasses.asdict(CANDIDATES), **about})
    return path


_routed = routed_train_file(ROUTES, lambda work: {"pool": str(pool_file(work).resolve())})


def train_file(arm: Arm, seed: int, exp: Experiment) -> Path:
    """The arm's routed version of the stratified pool (the pool's description written beside the results)."""
    from devenus.atomic import write_text_atomic
    from devenus.records.versions import read_manifest

    about = exp.results.parent / f"{exp.name}_pool.json"
    if not about.exists():
        about.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(about, json.dumps(read_manifest(pool_file(exp.work)).config, indent=1, sort_keys=True))
    return _routed(arm, seed, exp)


def cost_text(exp: Experiment) -> str:
    """Each arm's cost: training rows, steps and rollouts generated (mean over its finished seeds)."""
    rows = {}
    for (name, seed), r in sorted(exp.finished().items()):
        if name == BASE:
            continue
        e = r.get("epochs") or {}
        rollouts = sum(c.get("devenus/rollouts/generated", 0) for c in r.get("curves", []))
        rows.setdefault(name, []).append((e.get("rows"), (r.get("config") or {}).get("run", {}).get("steps"), rollouts))
    epochs = exp.budget.get("epochs")
    how = (f"equal epochs: steps = ceil({epochs:g} x rows / {exp.budget['prompts_per_step']})" if epochs is not None else
           f"every arm {exp.budget['steps']} steps, equal epochs off: rows not recorded")
    lines = ["", f"Cost per arm ({how}); mean over seeds:", "",
             "| arm | seeds | training rows | steps | rollouts generated |", "|---|---|---|---|---|"]

    def mean(vals):
        vals = [v for v in vals if v is not None]
        return f"{sum(vals) / len(vals):.0f}" if vals else "-"

    for a in exp.arms:
        runs = rows.get(a.name, [])
        lines.append(f"| {a.name} | {len(runs)} | {mean(r[0] for r in runs)} | {mean(r[1] for r in runs)} | "
                     f"{mean(r[2] for r in runs)} |")
    return "\n".join(lines) + "\n"


DEFINITION = Definition(
    name=NAME,
    summary="TTRL on the routed subset vs a random subset of the same size vs GRPO on the full 512-question "
            "stratified pool, 2 epochs of each arm's own data",
    arms=(
        Arm("grpo_full", "grpo"),
        Arm("ttrl_random", "ttrl", method_config=TTRL),
        # the runner's table has one baseline per arm: the random subset (the claim vs grpo_full is power.py's)
        Arm("ttrl_selected", "ttrl", method_config=TTRL, baseline="ttrl_random", claimed_side=1),
    ),
    budget=Budget(steps=64, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5,
                  epochs=EPOCHS),
    seeds=(0, 1, 2, 3, 4, 5),
    train_file=train_file,
    report=text_report("cost", cost_text),
)
