"""The miniature Figure 3: weak supervision on the CPU testbed, through verl's real trainer.

    python experiments/weak_supervision.py --quick            # every arm, one seed  (budget: 30 min)
    python experiments/weak_supervision.py --full             # every arm, 3 seeds    (budget: 3 h)
    python experiments/weak_supervision.py --arm ttrl@0 --seed 1   # one arm on its own
    python experiments/weak_supervision.py --report           # table + plot from the results on disk

Arms: GRPO with full labels; labeled-only GRPO with 10% labels; and each label-free method both
unsupervised ("@0") and semi-supervised with 10% labels ("@10"). Labels are hidden with
`devenus.records.hide_labels` (the hidden answers stay as simulation truth for pseudo-label
accuracy; no method reads them). Held-out accuracy is verl's own validation on the testbed's test
splits (T=1, avg@val_n), which the runs never train or tune on; knobs were set before looking at it.

Results: one JSON per (arm, seed) under experiments/results/weak_supervision/, aggregated by --report
into results.md (table, mean and 95% CI over seeds) and results.png.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "weak_supervision"


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
    steps: int
    prompts_per_step: int = 16
    rollouts_per_prompt: int = 8
    val_n: int = 2
    kl_coef: float = 0.01
    lr: float = 5e-5


QUICK = Budget(steps=20)
FULL = Budget(steps=30, val_n=4)


def run_arm(arm: Arm, seed: int, budget: Budget, work: Path) -> dict:
    from devenus.recipes.testbed_train import RunConfig, run
    from devenus.records import hide_labels, read_records, write_records
    from devenus.testbed import build_testbed

    tb = build_testbed()
    train = read_records(tb.split("train"))
    data = work / f"train_{arm.labeled_fraction:g}_s{seed}.parquet"
    if arm.labeled_fraction < 1.0 and not data.exists():
        write_records(hide_labels(train, arm.labeled_fraction, seed=seed), data)
    if arm.method == "corewarding":  # both views of each question; a pair shares its label state
        data = work / f"pairs_{arm.labeled_fraction:g}_s{seed}.parquet"
        if not data.exists():
            from devenus.records.pairs import pair_views

            originals = hide_labels(train, arm.labeled_fraction, seed=seed)
            hidden = {r["extra_info"]["index"] for r in originals if not r["extra_info"]["labeled"]}
            para = read_records(tb.split("train_paraphrase"))
            para = hide_labels([p for p in para if p["extra_info"]["pair_key"] in hidden], 0.0) + [
                p for p in para if p["extra_info"]["pair_key"] not in hidden]
            write_records(pair_views(originals, para), data)
    extra = [f"+devenus.method_config.{k}={v}" for k, v in arm.method_config.items()] + list(arm.overrides)
    cfg = RunConfig(
        method=arm.method,
        steps=budget.steps,
        prompts_per_step=budget.prompts_per_step,
        rollouts_per_prompt=budget.rollouts_per_prompt,
        lr=budget.lr,
        kl_coef=budget.kl_coef,
        val_n=budget.val_n,
        seed=seed,
        train_file=str(data) if (arm.labeled_fraction < 1.0 or arm.method == "corewarding") else None,
        extra_overrides=tuple(extra),
    )
    out_dir = work / f"{arm.name}_s{seed}"
    t0 = time.perf_counter()
    res = run(tb, out_dir, cfg)
    record = {
        "arm": asdict(arm),
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
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{arm.name}_s{seed}.json").write_text(json.dumps(record, indent=1))
    return record


def _pm(mean: float, ci: float) -> str:
    return f"{mean:.3f}" if math.isnan(ci) else f"{mean:.3f} ± {ci:.3f}"


def _ci(xs: list[float]) -> tuple[float, float]:
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))


def report() -> None:
    recs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    if not recs:
        raise SystemExit(f"no results in {RESULTS}")
    by_arm: dict[str, list[dict]] = {}
    for r in recs:
        by_arm.setdefault(r["arm"]["name"], []).append(r)
    lines = ["| arm | seeds | ID (final; ± 95% CI over seeds) | OOD (final) | ID change | pseudo-label acc (last 5 steps) | failed runs |",
             "|---|---|---|---|---|---|---|"]
    summary = {}
    for name in [a.name for a in arms() if a.name in by_arm]:
        rs = [r for r in by_arm[name] if r["returncode"] == 0 and len(r["validation"]) >= 2]
        failed = len(by_arm[name]) - len(rs)
        if not rs:
            lines.append(f"| {name} | 0 | - | - | - | - | {failed} |")
            continue
        fin = lambda r, s: r["validation"][max(r["validation"], key=int)][s]["sampled"]["mean"]  # noqa: E731
        ini = lambda r, s: r["validation"][min(r["validation"], key=int)][s]["sampled"]["mean"]  # noqa: E731
        idm, idc = _ci([fin(r, "ID") for r in rs])
        odm, odc = _ci([fin(r, "OOD") for r in rs])
        dm, _ = _ci([fin(r, "ID") - ini(r, "ID") for r in rs])
        pl = [statistics.mean(c["devenus/target/accuracy"] for c in r["curves"][-5:] if "devenus/target/accuracy" in c)
              for r in rs if any("devenus/target/accuracy" in c for c in r["curves"][-5:])]
        pls = f"{statistics.mean(pl):.3f}" if pl else "-"
        lines.append(f"| {name} | {len(rs)} | {_pm(idm, idc)} | {_pm(odm, odc)} | {dm:+.3f} | {pls} | {failed} |")
        summary[name] = (idm, idc, odm, odc)
    budgets = {json.dumps(r["budget"], sort_keys=True) for r in recs}
    seeds = sorted({r["seed"] for r in recs})
    header = (f"Testbed, verl on the CPU; seeds {seeds}; budget(s) {', '.join(sorted(budgets))}. Held-out sampled "
              f"pass@1 (T=1, avg@val_n) from verl's validation at the last step; 'ID change' is against the same "
              f"run's step-0 validation. Pseudo-label accuracy is against hidden truth (methods never see it).\n\n")
    table = header + "\n".join(lines)
    print(table)
    (RESULTS.parent / "weak_supervision.md").write_text(table + "\n")
    _plot(summary, by_arm)


def _plot(summary: dict, by_arm: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    names = list(summary)
    x = range(len(names))
    for off, (idx, label) in zip((-0.2, 0.2), ((0, "ID"), (2, "OOD"))):
        ax1.bar([i + off for i in x], [summary[n][idx] for n in names], 0.4,
                yerr=[0 if math.isnan(summary[n][idx + 1]) else summary[n][idx + 1] for n in names], label=label, capsize=3)
    ok = [r for rs in by_arm.values() for r in rs if r["returncode"] == 0 and r["validation"]]
    for split, color in (("ID", "C0"), ("OOD", "C1")):  # the base model, before any RL
        base = [r["validation"][min(r["validation"], key=int)][split]["sampled"]["mean"] for r in ok]
        ax1.axhline(statistics.mean(base), color=color, linestyle="--", linewidth=1, label=f"{split} before RL")
    ax1.set_xticks(list(x), names, rotation=45, ha="right")
    ax1.set_ylabel("held-out sampled pass@1 (final)")
    ax1.legend()
    for name, rs in by_arm.items():
        for r in [r for r in rs if r["returncode"] == 0][:1]:
            pts = [(c["step"], c["devenus/target/accuracy"]) for c in r["curves"] if "devenus/target/accuracy" in c]
            if pts:
                ax2.plot(*zip(*pts), label=name)
    ax2.set_xlabel("step")
    ax2.set_ylabel("pseudo-label accuracy (vs hidden truth)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS.parent / "weak_supervision.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--arm")
    mode.add_argument("--report", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default="outputs/weak_supervision")
    args = ap.parse_args()
    if args.report:
        return report()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    budget = FULL if args.full else QUICK
    todo = [a for a in arms() if args.arm in (None, a.name)]
    if not todo:
        raise SystemExit(f"unknown arm {args.arm!r}; arms: {[a.name for a in arms()]}")
    seeds = [0, 1, 2] if args.full else [args.seed]
    for seed in seeds:
        for arm in todo:
            r = run_arm(arm, seed, budget, work)
            fin = r["validation"].get(str(budget.steps), {})
            print(f"[{arm.name} s{seed}] rc={r['returncode']} {r['wall_s']:.0f}s "
                  f"ID={fin.get('ID', {}).get('sampled', {}).get('mean', float('nan')):.3f}", flush=True)
    report()


if __name__ == "__main__":
    sys.exit(main())
