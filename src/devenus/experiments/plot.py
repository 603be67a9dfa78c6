"""The picture of an experiment's report: each arm's paired difference from its baseline, with its
interval and the per-seed differences it came from (a forest plot), one panel per held-out split.

Drawn from ``Experiment.comparisons()`` and the per-run records, so it shows exactly what the table
says; matplotlib is imported only here (the ``plot`` extra).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Mapping, Sequence

from devenus.atomic import atomic_write

SPLITS = ("ID", "near-OOD", "far-OOD")


def per_seed_differences(records: Mapping[tuple[str, int], dict], arm: str, ref: str, split: str,
                         seeds: list[int]) -> list[float]:
    """arm minus ref, seed by seed, over the seeds the comparison paired."""
    return [records[(arm, s)]["accuracy"][split] - records[(ref, s)]["accuracy"][split] for s in seeds
            if (arm, s) in records and (ref, s) in records
            and split in records[(arm, s)]["accuracy"] and split in records[(ref, s)]["accuracy"]]


def _limits(cells, points=()) -> tuple[float, float] | None:
    """x-axis limits covering every interval in ``cells``, every point and 0, with a margin."""
    if not cells and not points:
        return None
    xs = [0.0, *points]
    for d in cells:
        hw = d["half_width"] if d["half_width"] == d["half_width"] else 0.0  # NaN: one run, no interval
        xs += [d["mean"] - hw, d["mean"] + hw]
    lo, hi = min(xs), max(xs)
    pad = 0.08 * (hi - lo or 0.01)
    return lo - pad, hi + pad


def plot_differences(name: str, comp: Mapping[str, dict], records: Mapping[tuple[str, int], dict],
                     out: Path) -> Path | None:
    """Write ``out`` (PNG, atomically); None when no arm has a paired difference to draw."""
    rows = [(arm, row["vs_baseline"] if row.get("vs_baseline") else row.get("vs_base"))
            for arm, row in comp.items()]
    rows = [(arm, p) for arm, p in rows if p and p.get("by") and "ID" in p]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = [g for g in SPLITS if any(g in p for _, p in rows)]
    fig, axes = plt.subplots(1, len(splits), figsize=(4.2 * len(splits), 0.42 * len(rows) + 1.6), sharey=True,
                             squeeze=False)
    ys = list(range(len(rows)))[::-1]
    for ax, split in zip(axes[0], splits):
        for y, (arm, p) in zip(ys, rows):
            d = p.get(split)
            if not d:
                continue
            verdict = p.get("verdict_ID", "") if split == "ID" else ""
            color = "tab:green" if "claimed side" in verdict else "tab:red" if "other side" in verdict else "tab:gray"
            ax.errorbar(d["mean"], y, xerr=d["half_width"], fmt="o", color=color, capsize=3)
            if p["by"] == "seeds":
                dots = per_seed_differences(records, arm, p["ref"], split, p["seeds"])
                ax.scatter(dots, [y] * len(dots), s=10, color="black", alpha=0.5, zorder=3)
        # the axis is set by the intervals of 3 or more runs: a 2-run interval (t = 12.7) would set it
        # alone and squash every other row; such an interval runs off the axis, its row says n = 2
        # (every row's mean and per-seed dots stay on it)
        lim = _limits([p[split] for _, p in rows if p.get(split) and p[split]["n"] >= 3]
                      or [p[split] for _, p in rows if p.get(split)],
                      [x for arm, p in rows if p.get(split) for x in [p[split]["mean"]]
                       + (per_seed_differences(records, arm, p["ref"], split, p["seeds"]) if p["by"] == "seeds" else [])])
        if lim:
            ax.set_xlim(*lim)
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))  # narrow panels: fewer ticks, no overlapping labels
        ax.axvline(0.0, color="black", lw=0.8)
        ax.set_title(f"Δ{split} vs baseline")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels([f"{arm} − {p['ref']}  (n={p['ID']['n']})" for arm, p in rows])
    bys = sorted({p["by"] for _, p in rows})
    title = (f"{name}: paired differences, 95% Student-t intervals (paired by {' / '.join(bys)}); dots: per "
             f"seed; green/red: interval excludes 0 on the claimed/other side (per arm, before Holm: the claims table decides); n: runs paired; axis set by n >= 3")
    # wrapped to the figure's width so a one-panel figure does not cut it
    fig.suptitle(textwrap.fill(title, width=int(30 * 4.2 * len(splits) / 1.8)), fontsize=8)
    fig.tight_layout()
    with atomic_write(out, suffix=".png") as tmp:  # matplotlib picks the format from the name
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return out


def plot_curves(name: str, panels: Mapping[str, Mapping[str, list]], out: Path,
                targets: Mapping[str, tuple[float, float, float]] | None = None,
                levels: Sequence[float] = ()) -> Path | None:
    """Held-out accuracy against rollouts generated: one panel per reference arm, one colour per arm, one
    line per seed (``panels[title][arm] = [points of seed 0, points of seed 1, ...]``, points as
    :func:`devenus.experiments.curves.accuracy_curve` gives them). ``targets[title] = (accuracy, rollouts,
    goal)``: the reference's final accuracy (dashed) and ``goal`` x its rollouts (dotted), means over seeds;
    ``levels``: accuracy levels drawn as thin grey lines in every panel.
    Writes ``out`` (PNG, atomically); None when there is no curve to draw."""
    panels = {t: {a: [p for p in runs if p] for a, runs in arms.items()} for t, arms in panels.items()}
    panels = {t: {a: runs for a, runs in arms.items() if runs} for t, arms in panels.items()}
    panels = {t: arms for t, arms in panels.items() if arms}
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.0), squeeze=False)
    for ax, (title, arms) in zip(axes[0], panels.items()):
        for i, (arm, runs) in enumerate(arms.items()):
            color = f"C{i}"
            for j, pts in enumerate(runs):
                xs, ys = zip(*pts)
                ax.plot(xs, ys, "o-", color=color, ms=3, lw=1.2, alpha=0.8, label=arm if j == 0 else None)
        if targets and title in targets:
            acc, rollouts, goal = targets[title]
            ax.axhline(acc, color="black", ls="--", lw=0.8, label="reference's final accuracy")
            ax.axvline(goal * rollouts, color="black", ls=":", lw=0.8, label=f"{goal:g} x reference's rollouts")
        for k, level in enumerate(levels):
            ax.axhline(level, color="grey", ls=":", lw=0.7, label="accuracy levels" if k == 0 else None)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("rollouts generated (cumulative)")
        ax.set_ylabel("held-out ID accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{name}: validation points (trainer.test_freq); one line per seed", fontsize=8)
    fig.tight_layout()
    with atomic_write(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return out
