"""Power analysis for the experiment plans (experiments/plans/*.md), from the committed results only.

For each plan: the paired differences (arm minus its reference, per seed, ID accuracy) of its claims in the
committed results, read with the runner's own loader and pairing (`Experiment.records`, `Experiment._paired`:
a seed pairs only runs on the same base-model weights); their SD; the seeds a paired t test needs to detect a
difference of the plan's margin and TOST needs to call a true 0 a null within it (alpha 0.05, power 0.8); and
the CPU cost of the planned design from the committed runs' wall times (two runs at a time).

    python experiments/power.py              # every plan
    python experiments/power.py --plan label_noise
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from devenus.experiments.runner import BASE, Experiment
from devenus.experiments.stats import power_difference, seeds_needed, t_ppf

RESULTS = Path(__file__).resolve().parent / "results"
CEILING_MIN = 8 * 60  # wall-clock ceiling across every first-stage plan, two runs at a time
#: confirmatory follow-ups (a replication of a pilot's undecided claims, or a claim an amendment took out of a
#: first-stage plan) are budgeted apart, and stated: 4 h at first (label_noise_confirm, trapo_ten_percent,
#: label_free_confirm), raised by 80 min for inactive_noise_confirm (its plan says so)
FOLLOW_UP_CEILING_MIN = 4 * 60 + 80
PARALLEL = 2


@dataclass(frozen=True)
class Plan:
    name: str
    source: str | None  # the committed experiment whose variances size it (None: nothing committed)
    claims: tuple[tuple[str, str], ...]  # (arm, reference) pairs of the source whose SD is used
    margin: float  # pre-registered equivalence margin, ID accuracy (absolute)
    runs_per_seed: int  # training runs of the planned design per seed (base validation counted apart)
    steps: int  # planned training steps per run
    seeds: int  # planned seeds
    sides: tuple[int, ...] = ()  # each claim's claimed sign (+1, -1; 0: equivalence), as in the plan
    step_scale: float = 1.0  # cost of a planned step against a committed one (larger batch, longer answers)
    notes: str = ""
    borrow: str | None = None  # where source is None: the plan whose SD stands in until a pilot exists
    extra_min: float = field(default=0.0)  # fixed extra minutes (e.g. data building), once
    #: the experiment that runs the plan's own design, and its claims (arm, reference, side) as the plan states
    #: them; when it has results the claims table decides these instead of the old design's
    run: str | None = None
    run_claims: tuple[tuple[str, str, int], ...] = ()
    paper: str = ""  # the published claim the plan tests (paper, model), for the claims table
    #: a confirmatory plan reads its verdict only once every planned seed has finished (no interim look)
    confirmatory: bool = False


PLANS = {
    p.name: p for p in (
        Plan("ten_percent_labels", "refine_ten_percent",
             (("geomin@10", "grpo_full"), ("trapo@10", "grpo_full"), ("geomin@10", "grpo@10"), ("trapo@10", "grpo@10")),
             sides=(1, 0, 1, 1), margin=0.03, runs_per_seed=4, steps=40, seeds=5,
             # the amendment took TraPO out; its claim vs full labels is trapo_ten_percent's, vs grpo@10 untested
             run="ten_percent_labels", run_claims=(("geomin@10", "grpo_full", 1), ("geomin@10", "grpo@10", 1),
                                             ("trapo@10", "grpo@10", 1)),
             paper="GeoMin / TraPO papers (Qwen3-4B): 10% labels at or near full labels"),
        Plan("label_noise_rho", "label_noise",
             tuple((f"olr@{k}{r}", f"grpo@{k}{r}") for k in ("inactive", "active") for r in ("0.1", "0.3", "0.5")),
             sides=(1,) * 6, margin=0.03, runs_per_seed=9, steps=48, seeds=5,
             notes="sized on the 64-question pilot's SDs; runs rho 0.9 first (5 runs a seed)",
             run="label_noise_rho",
             run_claims=tuple((f"olr@{k}{r}", f"grpo@{k}{r}", 1) for r in ("0.9", "0.5") for k in ("inactive", "active")),
             paper="OLR paper (Qwen family): OLR > GRPO at every noise ratio up to 0.9"),
        Plan("label_noise_confirm", "label_noise_rho",
             (("olr@active0.9", "grpo@active0.9"), ("olr@active0.5", "grpo@active0.5")),
             sides=(1, 1), margin=0.03, runs_per_seed=4, steps=48, seeds=8, confirmatory=True,
             notes="replicates label_noise_rho's active claims on seeds 5-12, decided on those alone",
             run="label_noise_confirm",
             run_claims=tuple((f"olr@active{r}", f"grpo@active{r}", 1) for r in ("0.9", "0.5")),
             paper="OLR paper (Qwen family): OLR > GRPO under active noise (replication)"),
        Plan("inactive_noise_confirm", "label_noise_rho", (("olr@inactive0.5", "grpo@inactive0.5"),),
             sides=(1,), margin=0.03, runs_per_seed=2, steps=48, seeds=10, confirmatory=True,
             notes="replicates label_noise_rho's inactive 0.5 claim on seeds 5-14, decided on those alone",
             run="inactive_noise_confirm", run_claims=(("olr@inactive0.5", "grpo@inactive0.5", 1),),
             paper="OLR paper (Qwen family): OLR > GRPO under inactive noise (replication)"),
        Plan("trapo_ten_percent", "ten_percent_labels", (("geomin@10", "grpo_full"),),
             sides=(0,), margin=0.03, runs_per_seed=2, steps=160, seeds=5, confirmatory=True,
             notes="TraPO's ten_percent_labels claim at 5 visits a question; GeoMin's SD on the same pools sizes it",
             run="trapo_ten_percent", run_claims=(("trapo@10", "grpo_full", 0),),
             paper="TraPO paper (Qwen3-4B): 10% labels within about a point of full labels"),
        Plan("selection", "selection", (("ttrl_routed", "grpo_full"), ("ttrl_random", "ttrl_routed")),
             sides=(1, -1), margin=0.03, runs_per_seed=3, steps=46, seeds=6,
             notes="equal epochs: 46 = the arms' mean steps (grpo_full 64, each 296-row subset 37)",
             run="selection_epochs",
             run_claims=(("ttrl_selected", "grpo_full", 1), ("ttrl_selected", "ttrl_random", 1)),
             paper="DE-Venus selection (57.9% data, 29.3% labels) >= full data"),
        Plan("label_free", "weak_supervision_paired", (("ttrl@0", "grpo_full"),),
             sides=(-1,), margin=0.03, runs_per_seed=1, steps=40, seeds=3,
             notes="grpo_full shared with ten_percent_labels (same pool, budget, seeds)",
             run="ten_percent_labels", run_claims=(("ttrl@0", "grpo_full", -1),),
             paper="TTRL; arXiv 2511.04902: label-free RL trails full labels"),
        Plan("label_free_confirm", "ten_percent_labels", (("ttrl@0", "grpo_full"),),
             sides=(-1,), margin=0.03, runs_per_seed=2, steps=40, seeds=5, confirmatory=True,
             notes="replicates label_free's claim on seeds 5-9 (grpo_full run anew: ten_percent_labels has 0-4)",
             run="label_free_confirm", run_claims=(("ttrl@0", "grpo_full", -1),),
             paper="TTRL; arXiv 2511.04902: label-free RL trails full labels (replication)"),
        Plan("rollout_savings", "rollout_savings",
             (("grpo+skip", "grpo"), ("grpo+ds", "grpo"), ("grpo+ds+skip", "grpo+ds")),
             sides=(0, 0, 0), margin=0.03, runs_per_seed=4, steps=32, seeds=3,
             run="rollout_budget",
             run_claims=(("grpo+ds+skip", "grpo+ds", 0), ("grpo+skip", "grpo", 0), ("grpo+ds", "grpo", 0)),
             paper="GRESO (Qwen2.5-Math-7B): same accuracy, 2.4x less rollout time than dynamic sampling"),
        Plan("real_model", "real_model", (("grpo", "base"), ("ttrl", "grpo"), ("semi@10", "ttrl")),
             sides=(1, -1, 1), margin=0.03, runs_per_seed=3, steps=6, seeds=2,
             notes="the 2-seed pilot on SmolLM2: its SD sizes the next plan",
             paper="TTRL / TraPO directions on a real small model (SmolLM2 pilot)"),
    )
}


def _load(source: str) -> tuple[Experiment, dict]:
    # the runner's loader: every <arm>_s<seed>.json of the experiment, keyed (arm, seed)
    exp = Experiment(source, arms=[], budget={}, results=RESULTS / source)
    return exp, {k: r for k, r in exp.records().items() if r.get("returncode") == 0 and r.get("per_question")}


def paired_sd(source: str, arm: str, ref: str) -> tuple[float, int, float]:
    """(SD of the per-seed ID differences, n, mean) of ``arm`` minus ``ref`` in the committed results."""
    _, recs = _load(source)
    runs = {s: r for (n, s), r in recs.items() if n == arm}
    refs = {s: r for (n, s), r in recs.items() if n == ref}
    if not runs or not refs:
        raise ValueError(f"{source}: no committed results for {arm} and {ref}")
    iv = Experiment._paired(runs, refs).get("ID")
    if not iv or iv["n"] < 2:
        return float("nan"), 0 if not iv else iv["n"], float("nan") if not iv else iv["mean"]
    sd = iv["half_width"] * math.sqrt(iv["n"]) / t_ppf(0.5 + iv["level"] / 2, iv["n"] - 1)
    return sd, iv["n"], iv["mean"]


def pooled_sd(rows: list[tuple[float, int]]) -> float:
    """SD pooled over comparisons (variances weighted by their degrees of freedom)."""
    ok = [(sd, n) for sd, n in rows if n >= 2 and not math.isnan(sd)]
    if not ok:
        return float("nan")
    return math.sqrt(sum((n - 1) * sd * sd for sd, n in ok) / sum(n - 1 for _, n in ok))


def run_minutes(source: str) -> tuple[float, float]:
    """(minutes of a base validation run, minutes per training step) from the committed wall times (medians)."""
    _, recs = _load(source)
    base = [r["wall_s"] for (n, _), r in recs.items() if n == BASE]
    b = statistics.median(base) / 60
    per_step = [(r["wall_s"] / 60 - b) / max(1, r.get("final_step") or r["budget"]["steps"])
                for (n, _), r in recs.items() if n != BASE]
    return b, statistics.median(per_step)


def detectable(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true difference the paired t test detects with ``power`` at ``n`` seeds (bisection)."""
    lo, hi = 0.0, 10 * sd + 1e-12
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if power_difference(n, sd, mid, alpha) >= power else (mid, hi)
    return hi


def analyse(plan: Plan) -> dict:
    src_plan = PLANS[plan.borrow] if plan.borrow else plan
    rows = []
    for arm, ref in src_plan.claims:
        sd, n, mean = paired_sd(src_plan.source, arm, ref)
        rows.append({"arm": arm, "ref": ref, "n": n, "mean": mean, "sd": sd})
    sd = pooled_sd([(r["sd"], r["n"]) for r in rows])
    # a comparison that came out identical in every seed (sd 0: the arm did nothing) would shrink the pool
    # toward 0; the worst single SD sizes the plan instead
    worst = max((r["sd"] for r in rows if not math.isnan(r["sd"])), default=float("nan"))
    base_min, step_min = run_minutes(src_plan.source)
    per_run = base_min + plan.steps * step_min * plan.step_scale
    runs = plan.seeds * plan.runs_per_seed
    total = runs * per_run + plan.seeds * base_min * plan.step_scale
    out = {"plan": plan.name, "source": src_plan.source, "claims": rows, "pooled_sd": sd, "worst_sd": worst,
           "margin": plan.margin, "seeds_planned": plan.seeds, "runs": runs + plan.seeds,
           "minutes_per_run": per_run, "wall_min": total / PARALLEL + plan.extra_min}
    if not math.isnan(worst):
        out["seeds_difference"] = seeds_needed(worst, plan.margin, "difference")
        out["seeds_equivalence"] = seeds_needed(worst, plan.margin, "equivalence")
        out["seeds_difference_pooled"] = seeds_needed(sd, plan.margin, "difference")
        out["seeds_equivalence_pooled"] = seeds_needed(sd, plan.margin, "equivalence")
        out["detectable_at_planned"] = detectable(worst, plan.seeds)
    return out


# the per-step mechanism ratio each committed run logged before devenus/mechanism/* existed (mean of its steps)
MECHANISM_TODAY = {"olr": ("devenus/target/correction_precision", "correction precision"),
                   "ttrl": ("devenus/target/accuracy", "pseudo-target precision"),
                   "trapo": ("devenus/target/accuracy", "pseudo-label precision"),
                   "geomin": ("devenus/target/accuracy", "pseudo-label precision")}


def mechanism_today(recs: dict, arm: str) -> str:
    # by the arm's method (semi@10 trains TTRL), else by its name
    method = next((r["arm"]["method"] for (n, _), r in recs.items() if n == arm and r.get("arm")), arm)
    key = next((v for k, v in MECHANISM_TODAY.items() if method.startswith(k) or arm.startswith(k)), None)
    if key is None:
        return "none declared (GRPO-family arm)"
    vals = [statistics.fmean(x) for (n, _), r in recs.items() if n == arm
            for x in [[c[key[0]] for c in r.get("curves", []) if isinstance(c.get(key[0]), (int, float))
                       and c[key[0]] == c[key[0]]]] if x]
    if not vals:
        return f"{key[1]}: not logged"
    return f"{key[1]} {min(vals):.2f}-{max(vals):.2f} (old `{key[0]}`, mean of steps, {len(vals)} runs)"


def claims_table() -> str:
    """The one claims table from today's committed results: each plan's claims decided with
    :func:`~devenus.experiments.stats.decide` and Holm across the plan's claims (on the plan's own runs where
    they exist, :func:`plan_rows`; else on the old design's)."""
    lines = ["| plan | paper's claim | claim tested (arm vs reference, claimed side) | mechanism metric (today) | ΔID ± 95% (n) | verdict "
             "(margin ±0.03, Holm) | cost (committed runs, run time) |", "|---|---|---|---|---|---|---|"]
    shown = {p.run for p in PLANS.values() if p.run and (RESULTS / p.run).is_dir()}
    for plan in PLANS.values():
        if plan.run and (RESULTS / plan.run).is_dir():
            lines += plan_rows(plan)
        elif plan.source is None or plan.source in shown:  # a replication's pilot has its own rows
            lines.append(f"| {plan.name} | {plan.paper} | see [plan](plans/{plan.name}.md) | - | - | not yet run under the plan | - |")
        else:
            claims = [(arm, ref, side) for (arm, ref), side in zip(plan.claims, plan.sides)]
            lines += decided_rows(plan, plan.source, claims, mechanism_today, "old design", min_seeds=0)
    return "\n".join(lines)


def mechanism_cell(recs: dict, arm: str) -> str:
    """The arm's ``devenus/mechanism/*`` ratios: per run (summed over its steps), the range over seeds, and
    the pooled numerator / denominator."""
    from devenus.experiments.mechanism import run_mechanism

    per_run = [r.get("mechanism") or run_mechanism(r.get("curves") or []) for (n, _), r in recs.items() if n == arm]
    keys = sorted({k for m in per_run for k in m})
    if not keys:
        method = next((r["arm"]["method"] for (n, _), r in recs.items() if n == arm and r.get("arm")), arm)
        return "none declared (GRPO-family arm)" if method == "grpo" else f"{method}'s metrics not logged in these runs"
    cells = []
    for key in keys:
        vals = [m[key]["value"] for m in per_run if key in m]
        num, den = sum(m[key]["num"] for m in per_run if key in m), sum(m[key]["den"] for m in per_run if key in m)
        cells.append(f"{key.removeprefix('devenus/mechanism/')} {min(vals):.2f}-{max(vals):.2f} ({num:g}/{den:g})")
    return "; ".join(cells)


def plan_rows(plan: Plan) -> list[str]:
    """The claims of ``plan`` decided on the results of its own design (``plan.run``), Holm across the claims
    that have paired seeds; a claim without runs is listed as not run."""
    return decided_rows(plan, plan.run, plan.run_claims, mechanism_cell, "plan design",
                        min_seeds=plan.seeds if plan.confirmatory else 2)


def decided_rows(plan: Plan, source: str, claims, mechanism, design: str, min_seeds: int) -> list[str]:
    """Table rows for ``claims`` ((arm, reference, claimed side)) on the committed results of ``source``: the
    paired ID difference (seeds on the same weights), the verdict with Holm across the claims decided, the
    ``mechanism(records, arm)`` cell, the cost; a claim with fewer than ``min_seeds`` paired seeds is not run."""
    from devenus.experiments.stats import decide_claims

    _, recs = _load(source)
    rows = []
    for c in decide_claims(recs, claims, plan.margin, min_seeds):
        claim = f"{c.arm} vs {c.ref}, {'+-='[{1: 0, -1: 1, 0: 2}[c.side]]}"
        if c.decision is None:
            rows.append(f"| {plan.name} | {plan.paper} | {claim} | - | {len(c.seeds)} paired seed(s) | "
                        f"{'verdict not read (fewer than the planned seeds)' if c.seeds else 'not run under the plan'} | - |")
            continue
        runs = {sd: r for (n, sd), r in recs.items() if n == c.arm}
        refs = {sd: r for (n, sd), r in recs.items() if n == c.ref}
        iv = Experiment._paired(runs, refs).get("ID", {})
        wall = sum(r["wall_s"] for k, r in recs.items() if k[0] in (c.arm, c.ref)) / 60
        rows.append(f"| {plan.name} | {plan.paper} | {claim} | {mechanism(recs, c.arm)} | "
                    f"{iv.get('mean', float('nan')):+.3f} ± {iv.get('half_width', float('nan')):.3f} ({c.decision.n}) | "
                    f"{c.verdict} ({design}) | {len([k for k in recs if k[0] in (c.arm, c.ref)])} runs, {wall:.0f} min |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", choices=sorted(PLANS), action="append")
    ap.add_argument("--claims", action="store_true", help="the claims table from today's committed results")
    args = ap.parse_args(argv)
    if args.claims:
        print(claims_table())
        return 0
    total = {False: 0.0, True: 0.0}
    for name in args.plan or list(PLANS):
        a = analyse(PLANS[name])
        total[PLANS[name].confirmatory] += a["wall_min"]
        print(f"## {name}  (variances from {a['source']}" + (", borrowed" if PLANS[name].borrow else "") + ")")
        for r in a["claims"]:
            print(f"  {r['arm']} - {r['ref']}: n {r['n']}, mean {r['mean']:+.3f}, SD {r['sd']:.4f}")
        print(f"  SD pooled {a['pooled_sd']:.4f}, worst {a['worst_sd']:.4f}; margin ±{a['margin']}")
        if "seeds_difference" in a:
            print(f"  seeds for alpha 0.05 / power 0.8 at the worst SD: paired t (effect = margin) "
                  f"{a['seeds_difference']}, TOST (true 0) {a['seeds_equivalence']}; at the pooled SD: "
                  f"{a['seeds_difference_pooled']}, {a['seeds_equivalence_pooled']}; at the planned {a['seeds_planned']} seeds "
                  f"the test detects {a['detectable_at_planned']:.3f} (worst SD)")
        print(f"  planned: {a['seeds_planned']} seeds, {a['runs']} runs x {a['minutes_per_run']:.1f} min, "
              f"{a['wall_min']:.0f} min wall at {PARALLEL} at a time" + (f"  [{PLANS[name].notes}]" if PLANS[name].notes else ""))
    for follow_up, ceiling in ((False, CEILING_MIN), (True, FOLLOW_UP_CEILING_MIN)):
        print(f"# {'confirmatory follow-ups' if follow_up else 'first-stage plans'}: total {total[follow_up]:.0f} min "
              f"wall (ceiling {ceiling})" + ("" if total[follow_up] <= ceiling else "  OVER THE CEILING"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
