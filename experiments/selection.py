"""Active data selection on the CPU testbed: does training on the routed pool (annotate the most uncertain
29.3%, discard the least uncertain 42.1%, weak supervision for the rest) match full data with full labels,
and does the signal beat random routing at the same budgets? Through the selection pipeline
(``devenus.select``), verl's real trainer and the experiment runner (paired seeds, paired intervals).

    python experiments/selection.py --quick     # every arm, seed 0      (budget: 30 min)
    python experiments/selection.py --full      # every arm, seeds 0-2   (budget: 3 h)
    python experiments/selection.py --report    # the table from the results on disk

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

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from devenus.experiments.provenance import Mixing, exit_on_mixed
from devenus.experiments.runner import Arm, Experiment, seed_list

NAME = "selection"
RESULTS = Path(__file__).parent / "results" / NAME
SEEDS = (0, 1, 2)
POOL_QUESTIONS = 512
SIGNAL = "consistency"
TTRL = {"votes": 16, "min_agreement": 0.5}

#: arm -> its routing (route overrides; ``{seed}`` is the run's seed)
ROUTES = {
    "grpo_full": {"route.rho_annotate": 1.0, "route.rho_discard": 0.0},
    "ttrl_routed": {"route.signal": SIGNAL},
    "ttrl_random": {"route.signal": "random", "route.seed": "{seed}"},
}


def arms() -> list[Arm]:
    return [
        Arm("grpo_full", "grpo"),
        Arm("ttrl_routed", "ttrl", method_config=TTRL, baseline="grpo_full", claimed_side=1),
        Arm("ttrl_random", "ttrl", method_config=TTRL, baseline="ttrl_routed", claimed_side=-1),
    ]


@dataclass(frozen=True)
class Budget:
    # one lr and KL for every arm, as in the weak-supervision experiment (set there before any held-out number)
    steps: int = 16
    prompts_per_step: int = 16
    rollouts_per_prompt: int = 8
    val_n: int = 4
    kl_coef: float = 0.01
    lr: float = 5e-5


BUDGET = Budget()


def select_config(work: Path, routing: dict | None = None, out: Path | None = None):
    from devenus.select.config import load_config

    over = {"pool": "testbed-pool", "out": str(Path(work) / "select"), "limit": POOL_QUESTIONS,
            "score.signals": ["consistency", "entropy"], "route.selector": "ratio"}
    over.update(routing or {})
    if out is not None:
        over["materialize.out"] = str(out)
    return load_config(None, over)


def train_file(arm: Arm, seed: int, work: Path) -> Path:
    """The arm's routed version of the pool. Generation and scoring run once (resumable shards under
    ``work/select``); each (routing, seed) is routed and materialized into its own dataset version, one
    at a time, before any training run starts."""
    from devenus.select.pipeline import run_generate, run_materialize, run_route, run_score

    routing = {k: (v.format(seed=seed) if isinstance(v, str) else v) for k, v in ROUTES[arm.name].items()}
    if "route.seed" in routing:
        routing["route.seed"] = int(routing["route.seed"])
        path = Path(work) / "data" / f"{arm.name}_s{seed}.parquet"
    else:
        path = Path(work) / "data" / f"{arm.name}.parquet"  # the signal's routing does not depend on the seed
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = select_config(work, routing, path)
    run_generate(cfg)
    run_score(cfg)
    route = run_route(cfg, force=True)  # the shared folder's route stage is this arm's until the next one
    run_materialize(cfg)
    _record_route(work, arm.name, seed, route)
    return path


def _record_route(work: Path, arm: str, seed: int, route) -> None:
    """Counts and the hidden pass rate of each decision (simulation truth: a diagnostic, never routed on)."""
    import numpy as np
    import pyarrow.parquet as pq

    from devenus.select.pipeline import read_questions, stage

    cfg = select_config(work)
    q = read_questions(stage(cfg, "score")).to_pydict()
    r = pq.read_table(str(route.shard_path(0))).to_pydict()
    sim = dict(zip(q["index"], q.get("sim_pass_rate") or [None] * len(q["index"])))
    out = {"arm": arm, "seed": seed, "counts": route.summary().get("counts")}
    for d in ("annotate", "weak", "discard"):
        vals = [sim[k] for k, dd in zip(r["index"], r["decision"]) if dd == d and sim.get(k) is not None]
        out[f"{d}_hidden_pass_rate"] = float(np.mean(vals)) if vals else None
    path = RESULTS.parent / f"{NAME}_routes.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[f"{arm}_s{seed}"] = out
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def experiment(results: Path = RESULTS, work: Path = Path(f"outputs/{NAME}"), budget: Budget = BUDGET,
               run_timeout_s: float | None = 3600) -> Experiment:
    return Experiment(NAME, arms(), asdict(budget), results=results, work=work, train_file=train_file,
                      run_timeout_s=run_timeout_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="every arm, seed 0 (or --seed)")
    mode.add_argument("--full", action="store_true", help=f"every arm, seeds {SEEDS}")
    mode.add_argument("--report", action="store_true", help="the table from the results on disk")
    ap.add_argument("--arm", help="only these arms (comma-separated), plus the baselines they are compared with")
    ap.add_argument("--seed", type=seed_list, default=[0], help="seed(s) for --quick and --arm: 0 or 1,2")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs side by side")
    ap.add_argument("--force", action="store_true", help="rerun finished (arm, seed) results")
    ap.add_argument("--run-timeout", type=float, default=3600, help="seconds before a run is killed and recorded as failed")
    ap.add_argument("--work", default=f"outputs/{NAME}")
    ap.add_argument("--results", default=str(RESULTS), help="per-run JSONs go here; the table beside it")
    Mixing.add_flags(ap)
    args = ap.parse_args()
    exp = experiment(Path(args.results), Path(args.work), run_timeout_s=args.run_timeout or None)
    exp.mixing = Mixing.from_args(args)
    if args.report:
        print(exp.report())
        return
    if not (args.quick or args.full or args.arm):
        ap.error("choose --quick, --full, --arm NAME[,NAME] or --report")
    seeds = list(SEEDS) if args.full else args.seed
    exp.run(seeds, args.arm.split(",") if args.arm else None, jobs=args.jobs, force=args.force)
    print(exp.report())


if __name__ == "__main__":
    sys.exit(exit_on_mixed(main))
