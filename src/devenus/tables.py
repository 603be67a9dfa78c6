"""Plain-text tables for terminal reports."""

from __future__ import annotations

from typing import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(cells[0]), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells[1:]])


def pm(mean: float, ci: float) -> str:
    return f"{mean:.3f} ± {ci:.3f}"


def accuracy_table(acc: dict) -> str:
    """The testbed's accuracy dict ({split: {n, sampled{mean,ci95,k}, greedy{mean,ci95}}}) as a table."""
    rows = []
    for name, d in acc.items():
        s, g = d["sampled"], d["greedy"]
        rows.append([name, d["n"], pm(s["mean"], s["ci95"]), pm(g["mean"], g["ci95"])])
    k = next(iter(acc.values()))["sampled"]["k"] if acc else 1
    return table(["split", "questions", f"sampled T=1 (avg@{k})", "greedy"], rows)
