"""Active data selection on the CPU testbed: does training on the routed pool (annotate the most uncertain
29.3%, discard the least uncertain 42.1%, weak supervision for the rest) match full data with full labels,
and does the signal beat random routing at the same budgets? Through the selection pipeline
(``devenus.select``), verl's real trainer and the experiment runner (paired seeds, paired intervals).

    devenus experiment selection --quick     # every arm, seed 0      (budget: 30 min)
    devenus experiment selection --full      # every arm, seeds 0-2   (budget: 3 h)
    devenus experiment selection --report    # the table from the results on disk

Plan (written before any run of this experiment; the claims are the report's, tested in direction):
- Pool: the first 512 questions of the testbed's unlabeled candidate pool (``testbed-pool``: addition of
  1-6 digits, answers hidden). One selection pass, shared by every seed: 8 samples per question at
  T = 1 (``generate.seed`` 0), scored by consistency and entropy.
- Routing signal: ``consistency``, chosen before this experiment on the pool's own hidden answers (it
  ranks wrong majorities best, AUROC 0.886 on the first 256 pool questions, docs/selection.md), never on
  held-out numbers.
- Arms:
  - ``grpo_full``: every pool question, every label (the full-annotation upper reference);
  - ``ttrl_routed``: the routed version (150 annotated, 147 weak, 215 discarded of 512), TTRL with the
    annotated rows' verified reward and majority votes for the weak rows;
  - ``ttrl_random``: the same budgets routed by a random order (``route.signal=random``, ``route.seed`` =
    the run's seed), the same TTRL.
- Claims: ``ttrl_routed`` vs ``grpo_full``: matches or beats (claimed side +; an interval that straddles 0
  is "matches"); ``ttrl_random`` vs ``ttrl_routed``: the signal matters (claimed side -).
- TTRL settings as in the weak-supervision experiment (16 votes, agreement floor 0.5; chosen there on
  training-side pseudo-label accuracy). Budget: 16 steps x 16 prompts x 8 rollouts, lr 5e-5, KL 0.01.
- Held-out: 512 ID, 256 near-OOD, 256 far-OOD questions, T=1, 4 samples each; never trained or tuned on.

Results: one JSON per (arm, seed) under experiments/results/selection/, the table in selection.md (and
.json) beside it, and the selection's own summary (counts, the routed sets' hidden pass rates) in
selection_routes.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping

from devenus.experiments.definition import Budget, Definition
from devenus.experiments.runner import Arm, Experiment, TrainFile

NAME = "selection"
POOL_QUESTIONS = 512
SIGNAL = "consistency"
TTRL = {"votes": 16, "min_agreement": 0.5}

#: arm -> its routing (route overrides; ``{seed}`` is the run's seed)
ROUTES = {
    "grpo_full": {"route.rho_annotate": 1.0, "route.rho_discard": 0.0},
    "ttrl_routed": {"route.signal": SIGNAL},
    "ttrl_random": {"route.signal": "random", "route.seed": "{seed}"},
}


#: (work folder) -> the selection config's pool keys
PoolKeys = Callable[[Path], dict]


def select_config(pool: PoolKeys, work: Path, routing: dict | None = None, out: Path | None = None):
    """The selection config: ``pool(work)``'s pool, both signals scored, the ratio router with ``routing``
    over it (the ``route.*`` keys), the routed version materialized to ``out``."""
    from devenus.select.config import load_config

    over = {**pool(work), "out": str(Path(work) / "select"), "score.signals": ["consistency", "entropy"],
            "route.selector": "ratio", **(routing or {})}
    if out is not None:
        over["materialize.out"] = str(out)
    return load_config(None, over)


def routed_train_file(routes: Mapping[str, Mapping], pool: PoolKeys) -> TrainFile:
    """A ``train_file``: the arm's routed version of the pool (``routes``: arm -> route overrides, ``{seed}``
    the run's seed; ``pool``: work folder -> the pool's keys of :func:`select_config`). Generation and scoring
    run once (resumable shards under ``<work>/select``); each (routing, seed) is routed and materialized into
    its own dataset version, one at a time, before any training run starts."""

    def train_file(arm: Arm, seed: int, exp: Experiment) -> Path:
        from devenus.select.stages import SelectionRun, run_generate, run_materialize, run_route, run_score

        routing = {k: (v.format(seed=seed) if isinstance(v, str) else v) for k, v in routes[arm.name].items()}
        if "route.seed" in routing:
            routing["route.seed"] = int(routing["route.seed"])
            path = exp.work / "data" / f"{arm.name}_s{seed}.parquet"
        else:
            path = exp.work / "data" / f"{arm.name}.parquet"  # the signal's routing does not depend on the seed
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        run = SelectionRun(select_config(pool, exp.work, routing, path))
        run_generate(run)
        run_score(run)
        route = run_route(run, force=True)  # the shared folder's route stage is this arm's until the next one
        run_materialize(run)
        _record_route(exp, arm.name, seed, route, select_config(pool, exp.work))
        return path

    return train_file


train_file = routed_train_file(ROUTES, lambda work: {"pool": "testbed-pool", "limit": POOL_QUESTIONS})


def _record_route(exp: Experiment, arm: str, seed: int, route, cfg) -> None:
    """Counts, the hidden pass rate of each decision and its histogram (simulation truth: a diagnostic, never
    routed on), in ``<name>_routes.json`` beside the results folder."""
    from collections import Counter

    import numpy as np
    import pyarrow.parquet as pq

    from devenus.atomic import write_text_atomic
    from devenus.select.stages import SelectionRun
    from devenus.select.stages.score import read_questions

    q = read_questions(SelectionRun(cfg).stage("score")).to_pydict()
    r = pq.read_table(str(route.shard_path(0))).to_pydict()
    sim = dict(zip(q["index"], q.get("sim_pass_rate") or [None] * len(q["index"])))
    out = {"arm": arm, "seed": seed, "counts": route.summary().get("counts")}
    for d in ("annotate", "weak", "discard"):
        vals = [sim[k] for k, dd in zip(r["index"], r["decision"]) if dd == d and sim.get(k) is not None]
        out[f"{d}_hidden_pass_rate"] = float(np.mean(vals)) if vals else None
        # where the budget went: questions per pass-rate bin k/G (G samples a question)
        g = cfg.generate.samples
        bins = Counter(round(v * g) for v in vals)
        out[f"{d}_hidden_pass_rate_bins"] = {f"{k}/{g}": bins[k] for k in sorted(bins)}
    path = exp.results.parent / f"{exp.name}_routes.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[f"{arm}_s{seed}"] = out
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True))


DEFINITION = Definition(
    name=NAME,
    summary="TTRL on the routed pool vs random routing at the same budgets vs GRPO on full data",
    arms=(
        Arm("grpo_full", "grpo"),
        Arm("ttrl_routed", "ttrl", method_config=TTRL, baseline="grpo_full", claimed_side=1),
        Arm("ttrl_random", "ttrl", method_config=TTRL, baseline="ttrl_routed", claimed_side=-1),
    ),
    # one lr and KL for every arm, as in the weak-supervision experiment (set there before any held-out number)
    budget=Budget(steps=16, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    train_file=train_file,
)
