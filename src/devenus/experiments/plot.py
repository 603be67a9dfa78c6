"""The picture of an experiment's report: each arm's paired difference from its baseline, with its
interval and the per-seed differences it came from (a forest plot), one panel per held-out split.

Drawn from ``Experiment.comparisons()`` and the per-run records, so it shows exactly what the table
says; matplotlib is imported only here (the ``plot`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from devenus.records.io import atomic_write

SPLITS = ("ID", "near-OOD", "far-OOD")


def per_seed_differences(records: Mapping[tuple[str, int], dict], arm: str, ref: str, split: str,
                         seeds: list[int]) -> list[float]:
    """arm minus ref, seed by seed, over the seeds the comparison paired."""
    return [records[(arm, s)]["accuracy"][split] - records[(ref, s)]["accuracy"][split] for s in seeds
            if (arm, s) in records and (ref, s) in records
            and split in records[(arm, s)]["accuracy"] and split in records[(ref, s)]["accuracy"]]


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
        ax.axvline(0.0, color="black", lw=0.8)
        ax.set_title(f"Δ{split} vs baseline")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels([f"{arm} − {p['ref']}" for arm, p in rows])
    bys = sorted({p["by"] for _, p in rows})
    fig.suptitle(f"{name}: paired differences, 95% Student-t intervals (paired by {' / '.join(bys)}); "
                 f"dots: per seed; green/red: interval excludes 0 on the claimed/other side", fontsize=8)
    fig.tight_layout()
    with atomic_write(out, suffix=".png") as tmp:  # matplotlib picks the format from the name
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return out
