"""The miniature Figure 3: weak supervision on the CPU testbed, through verl's real trainer.

    python experiments/weak_supervision.py --quick            # every arm, seed 0       (budget: 30 min)
    python experiments/weak_supervision.py --full             # every arm, seeds 0-2    (budget: 3 h)
    python experiments/weak_supervision.py --arm ttrl@0 --seed 1   # one arm on its own
    python experiments/weak_supervision.py --report           # table + plot from the results on disk

Arms: GRPO with full labels; labeled-only GRPO with 10% labels; and each label-free method both
unsupervised ("@0") and semi-supervised with 10% labels ("@10"). Labels are hidden with
`devenus.records.hide_labels` (the hidden answers stay as simulation truth for pseudo-label
accuracy; no method reads them). Held-out accuracy is verl's own validation on the testbed's test
splits (T=1, avg@val_n), which the runs never train or tune on; knobs were set before looking at it.

Quick mode is the full mode's first seed at the same budget, so its numbers are a subset of the full
table. Start-up is amortised where verl allows it: every arm starts from the same base model, so the
base is evaluated once per seed (``trainer.val_only``) instead of once per arm, and ``--jobs`` runs
arms side by side (one torch thread each). verl builds its workers per trainer, so each arm still
pays its own Ray and worker start-up (~30 s). Finished (arm, seed) results are kept and skipped on a
rerun; ``--force`` reruns them.

Results: one JSON per (arm, seed) and per base evaluation under experiments/results/weak_supervision/,
aggregated by --report into weak_supervision.md (table, mean and 95% CI over seeds) and .png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "weak_supervision"
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Arm:
    name: str
    method: str
    labeled_fraction: float
    method_config: dict = field(default_factory=dict)
    overrides: tuple[str, ...] = ()


def arms() -> list[Arm]:
    out = [Arm("grpo_full", "grpo", 1.0), Arm("grpo@10", "grpo", 0.1)]
    label_free = {
        # 16 votes and a 0.5 agreement floor: with 8 votes and no floor TTRL's pseudo-label accuracy fell
        # from 0.40 to 0.00 within 5 steps (bench/trainer_overhead.py run); chosen on training-side
        # pseudo-label accuracy, never on the held-out splits
        "ttrl": {"votes": 16, "min_agreement": 0.5},
        "corewarding": {},
        "corewarding2": {"min_agreement": 0.5},  # the same floor as TTRL, for the same reason
        "intuitor": {},
        "emrl": {"variant": "token_entropy"},
        "unsupervised": {},  # defaults: negative entropy + vote agreement, z-scored per group
    }
    for method, cfg in label_free.items():
        for frac, tag in ((0.0, "0"), (0.1, "10")):
            out.append(Arm(f"{method}@{tag}", method, frac, cfg))
    return out


@dataclass
class Budget:
    # one lr and KL for every arm (label-free arms collapse at the demo's lr 2e-4 without KL)
    steps: int = 16
    prompts_per_step: int = 16
    rollouts_per_prompt: int = 8
    val_n: int = 2
    kl_coef: float = 0.01
    lr: float = 5e-5


BUDGET = Budget()


def train_file(arm: Arm, seed: int, work: Path) -> Path | None:
    """The arm's training data: the testbed's train split with labels hidden (and views paired for
    Co-rewarding I). Built before any arm starts, so parallel arms never write the same file."""
    from devenus.records import hide_labels, read_records, write_records
    from devenus.testbed import build_testbed

    tb = build_testbed()
    if arm.method == "corewarding":  # both views of each question; a pair shares its label state
        path = work / f"pairs_{arm.labeled_fraction:g}_s{seed}.parquet"
        if not path.exists():
            from devenus.records.pairs import pair_views

            originals = hide_labels(read_records(tb.split("train")), arm.labeled_fraction, seed=seed)
            hidden = {r["extra_info"]["index"] for r in originals if not r["extra_info"]["labeled"]}
            para = read_records(tb.split("train_paraphrase"))
            para = hide_labels([p for p in para if p["extra_info"]["pair_key"] in hidden], 0.0) + [
                p for p in para if p["extra_info"]["pair_key"] not in hidden]
            write_records(pair_views(originals, para), path)
        return path
    if arm.labeled_fraction >= 1.0:
        return None  # the testbed's own train split
    path = work / f"train_{arm.labeled_fraction:g}_s{seed}.parquet"
    if not path.exists():
        write_records(hide_labels(read_records(tb.split("train")), arm.labeled_fraction, seed=seed), path)
    return path


def _run_config(seed: int, budget: Budget, **kw):
    from devenus.recipes.testbed_train import RunConfig

    return RunConfig(**asdict(budget), seed=seed, **kw)  # Budget's fields are RunConfig's, by name


def _run_and_save(name: str, arm: dict, seed: int, budget: Budget, cfg, work: Path) -> dict:
    """Train (or only evaluate) through verl; the result JSON keeps the held-out accuracy and step curves."""
    from devenus.recipes.testbed_train import run
    from devenus.testbed import build_testbed

    t0 = time.perf_counter()
    res = run(build_testbed(), work / name, cfg)
    return _save(name, {
        "arm": arm,
        "seed": seed,
        "budget": asdict(budget),
        "returncode": res.returncode,
        "wall_s": round(time.perf_counter() - t0, 1),
        "validation": {str(k): v for k, v in res.validation.items()},
        "curves": [
            {k: m[k] for k in m if k == "step" or k.startswith(("devenus/", "critic/score/mean", "response_length/mean", "actor/entropy"))}
            for m in res.metrics if m.get("step", 0) > 0
        ],
        "log": str(res.log),
    })


def run_base(seed: int, budget: Budget, work: Path) -> dict:
    """The base model's held-out accuracy, with this seed's validation sampling: every arm's step 0."""
    return _run_and_save(f"base_s{seed}", {"name": "base"}, seed, budget,
                         _run_config(seed, budget, val_only=True), work)


def run_arm(arm: Arm, seed: int, budget: Budget, work: Path) -> dict:
    data = train_file(arm, seed, work)
    extra = [f"+devenus.method_config.{k}={v}" for k, v in arm.method_config.items()] + list(arm.overrides)
    cfg = _run_config(seed, budget, method=arm.method, train_file=str(data) if data else None,
                      val_before_train=False, extra_overrides=tuple(extra))
    return _run_and_save(f"{arm.name}_s{seed}", asdict(arm), seed, budget, cfg, work)


def _save(name: str, record: dict) -> dict:
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS / f".{name}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(RESULTS / f"{name}.json")  # atomic: a killed sweep never leaves half a result
    return record


def _done(name: str, budget: Budget) -> bool:
    p = RESULTS / f"{name}.json"
    if not p.exists():
        return False
    r = json.loads(p.read_text())
    return r["returncode"] == 0 and r["budget"] == asdict(budget) and bool(r["validation"])


def _pm(mean: float, ci: float, signed: bool = False) -> str:
    m = f"{mean:+.3f}" if signed else f"{mean:.3f}"
    return m if math.isnan(ci) else f"{m} ± {ci:.3f}"


# two-sided 95% Student-t quantiles by degrees of freedom: with 3 seeds, 1.96 would understate the CI twofold
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def _ci(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% CI over seeds (Student t; NaN with one seed)."""
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, float("nan")
    df = len(xs) - 1
    t = _T95.get(df, 1.96 + 2.37 / df)  # beyond the table: the first-order expansion t = z + (z^3 + z) / (4 df)
    return m, t * statistics.stdev(xs) / math.sqrt(len(xs))


def _final(r: dict, split: str) -> float:
    return r["validation"][max(r["validation"], key=int)][split]["sampled"]["mean"]


def report() -> None:
    recs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    if not recs:
        raise SystemExit(f"no results in {RESULTS}")
    ok = lambda r: r["returncode"] == 0 and bool(r["validation"])  # noqa: E731
    base = {r["seed"]: r for r in recs if r["arm"]["name"] == "base" and ok(r)}
    by_arm: dict[str, list[dict]] = {}
    for r in recs:
        if r["arm"]["name"] != "base":
            by_arm.setdefault(r["arm"]["name"], []).append(r)
    lines = ["| arm | seeds | ID (final) | OOD (final) | ID change vs base | pseudo-label acc (last 5 steps) | failed runs |",
             "|---|---|---|---|---|---|---|"]
    summary: dict[str, tuple] = {}
    if base:
        bs = list(base.values())
        (im, ic), (om, oc) = _ci([_final(r, "ID") for r in bs]), _ci([_final(r, "OOD") for r in bs])
        lines.append(f"| base (before RL) | {len(bs)} | {_pm(im, ic)} | {_pm(om, oc)} | - | - | 0 |")
    for name in [a.name for a in arms() if a.name in by_arm]:
        rs = [r for r in by_arm[name] if ok(r)]
        failed = len(by_arm[name]) - len(rs)
        if not rs:
            lines.append(f"| {name} | 0 | - | - | - | - | {failed} |")
            continue
        idm, idc = _ci([_final(r, "ID") for r in rs])
        odm, odc = _ci([_final(r, "OOD") for r in rs])
        paired = [_final(r, "ID") - _final(base[r["seed"]], "ID") for r in rs if r["seed"] in base]
        change = _pm(*_ci(paired), signed=True) if paired else "-"
        pl = [statistics.mean(c["devenus/target/accuracy"] for c in r["curves"][-5:] if "devenus/target/accuracy" in c)
              for r in rs if any("devenus/target/accuracy" in c for c in r["curves"][-5:])]
        pls = f"{statistics.mean(pl):.3f}" if pl else "-"
        lines.append(f"| {name} | {len(rs)} | {_pm(idm, idc)} | {_pm(odm, odc)} | {change} | {pls} | {failed} |")
        summary[name] = (idm, idc, odm, odc)
    budgets = {json.dumps(r["budget"], sort_keys=True) for r in recs}
    seeds = sorted({r["seed"] for r in recs})
    walls = [r["wall_s"] for r in recs if ok(r)]
    header = (f"Testbed, verl on the CPU; seeds {seeds}; budget(s) {', '.join(sorted(budgets))}. Held-out sampled "
              f"pass@1 (T=1, avg@val_n over 256 ID and 256 OOD questions) from verl's validation after the last step; "
              f"± is the 95% CI of the mean over seeds (Student t; none with one seed). 'ID change' pairs each run with its seed's base "
              f"evaluation. Pseudo-label accuracy is against hidden truth (methods never see it). "
              f"{len(walls)} runs, {sum(walls) / 60:.0f} min of run time in all.\n\n")
    table = header + "\n".join(lines)
    print(table)
    (RESULTS.parent / "weak_supervision.md").write_text(table + "\n")
    _plot(summary, by_arm, base)


def _plot(summary: dict, by_arm: dict, base: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 4.8))
    names = list(summary)
    x = range(len(names))
    for off, (idx, label) in zip((-0.2, 0.2), ((0, "ID"), (2, "OOD"))):
        ax1.bar([i + off for i in x], [summary[n][idx] for n in names], 0.4,
                yerr=[0 if math.isnan(summary[n][idx + 1]) else summary[n][idx + 1] for n in names], label=label, capsize=3)
    for split, color in (("ID", "C0"), ("OOD", "C1")):
        if base:
            ax1.axhline(statistics.mean(_final(r, split) for r in base.values()), color=color, linestyle="--",
                        linewidth=1, label=f"{split} before RL")
    ax1.set_xticks(list(x), names, rotation=45, ha="right")
    ax1.set_ylabel("held-out sampled pass@1 (final; 95% CI over seeds)")
    ax1.legend(fontsize=8)
    methods = sorted({n.split("@")[0] for n, rs in by_arm.items()
                      if any("devenus/target/accuracy" in c for r in rs for c in r["curves"])})
    for name, rs in by_arm.items():
        per_step: dict[int, list[float]] = {}
        for r in rs:
            for c in r["curves"]:
                if "devenus/target/accuracy" in c:
                    per_step.setdefault(int(c["step"]), []).append(c["devenus/target/accuracy"])
        if per_step:
            steps = sorted(per_step)
            mean = [statistics.mean(per_step[s]) for s in steps]
            smooth = [statistics.mean(mean[max(0, i - 2): i + 1]) for i in range(len(mean))]  # trailing 3 steps
            ax2.plot(steps, smooth, label=name, linestyle="-" if name.endswith("@0") else "--",
                     color=f"C{methods.index(name.split('@')[0])}")
    ax2.set_xlabel("step")
    ax2.set_ylabel("pseudo-label accuracy vs hidden truth\n(mean over seeds, trailing 3-step mean)")
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(RESULTS.parent / "weak_supervision.png", dpi=110)


def main() -> None:
    global RESULTS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="every arm, seed 0")
    mode.add_argument("--full", action="store_true", help=f"every arm, seeds {SEEDS}")
    mode.add_argument("--report", action="store_true", help="table + plot from the results on disk")
    ap.add_argument("--arm", help="only these arms (comma-separated names); alone, runs them with --seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="arms run side by side")
    ap.add_argument("--force", action="store_true", help="rerun finished (arm, seed) results")
    ap.add_argument("--work", default="outputs/weak_supervision")
    ap.add_argument("--results", default=str(RESULTS),
                    help="per-run JSONs go here; the table and plot beside it (default: the committed results)")
    args = ap.parse_args()
    RESULTS = Path(args.results)
    if args.report:
        return report()
    if not (args.quick or args.full or args.arm):
        ap.error("choose --quick, --full, --arm NAME[,NAME] or --report")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    names = args.arm.split(",") if args.arm else [a.name for a in arms()]
    unknown = sorted(set(names) - {a.name for a in arms()})
    if unknown:
        raise SystemExit(f"unknown arm(s) {unknown}; arms: {[a.name for a in arms()]}")
    todo = [a for a in arms() if a.name in names]
    seeds = list(SEEDS) if args.full else [args.seed]
    jobs: list[tuple[str, object]] = []
    for seed in seeds:
        if args.force or not _done(f"base_s{seed}", BUDGET):  # every arm's step 0 for this seed
            jobs.append((f"base s{seed}", lambda seed=seed: run_base(seed, BUDGET, work)))
        for arm in todo:
            if args.force or not _done(f"{arm.name}_s{seed}", BUDGET):
                train_file(arm, seed, work)  # data first, in this thread
                jobs.append((f"{arm.name} s{seed}", lambda arm=arm, seed=seed: run_arm(arm, seed, BUDGET, work)))
    print(f"{len(jobs)} runs, {args.jobs} at a time", flush=True)
    t0 = time.perf_counter()

    def one(job):
        name, fn = job
        r = fn()
        fin = r["validation"].get(max(r["validation"], key=int), {}) if r["validation"] else {}
        print(f"[{name}] rc={r['returncode']} {r['wall_s']:.0f}s ID={fin.get('ID', {}).get('sampled', {}).get('mean', float('nan')):.3f} "
              f"({(time.perf_counter() - t0) / 60:.1f} min in)", flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, jobs))
    print(f"{len(results)} runs in {(time.perf_counter() - t0) / 60:.1f} min; "
          f"{sum(r['returncode'] != 0 for r in results)} failed", flush=True)
    report()


if __name__ == "__main__":
    sys.exit(main())
