"""What an evaluation leaves behind: a table on screen, ``results.json``, ``samples.jsonl`` and
``accuracy.png``, each written to a temporary file in the target folder and renamed into place."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from devenus.evaluate.run import EvalResult
from devenus.tables import table

__all__ = ["format_table", "to_json", "write_outputs"]


def _pm(d: dict) -> str:
    return f"{d['mean']:.3f} [{d['lo']:.3f}, {d['hi']:.3f}]"


def format_table(res: EvalResult) -> str:
    rows = []
    for b in res.benchmarks:
        m, k = b.metrics, b.metrics["k"]
        rows.append([b.name, b.group, m["n_questions"], k, _pm(m[f"avg@{k}"]), _pm(m[f"pass@{k}"]),
                     _pm(m[f"maj@{k}"]), f"{m['abstain_rate']:.2f}", f"{m['truncated_rate']:.2f}"])
    lines = [table(["benchmark", "group", "questions", "k", "avg@k (pass@1)", "pass@k", "maj@k", "no answer",
                    "cut at max tokens"], rows)]
    if res.averages:
        avg_rows = [[g, _pm(a), ", ".join(a["benchmarks"])] for g, a in res.averages.items()]
        lines += ["", table(["average", "headline metric (95% bootstrap CI)", "over"], avg_rows)]
    s = res.sampling
    lines += ["", f"protocol {res.protocol}: T={s.temperature}, top-p {s.top_p}, max {s.max_new_tokens} new tokens, "
                  f"seed {s.seed}; backend {res.backend}; {res.seconds:.0f} s"]
    return "\n".join(lines)


def to_json(res: EvalResult) -> dict:
    return {
        "protocol": res.protocol,
        "model": res.model,
        "backend": res.backend,
        "sampling": dataclasses.asdict(res.sampling),
        "seconds": round(res.seconds, 1),
        "averages": res.averages,
        "benchmarks": {b.name: {"group": b.group, "k": b.k, "seconds": round(b.seconds, 1), **b.metrics}
                       for b in res.benchmarks},
    }


def _plot(res: EvalResult, tmp: str, label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, means, lo, hi, colors = [], [], [], [], []
    for b in res.benchmarks:
        m = b.metrics[b.metrics["headline"]]
        names.append(f"{b.name}\n{b.metrics['headline']}")
        means.append(m["mean"]), lo.append(m["mean"] - m["lo"]), hi.append(m["hi"] - m["mean"])
        colors.append("tab:blue" if b.group == "ID" else "tab:orange")
    for g, a in res.averages.items():
        names.append(f"{g} average")
        means.append(a["mean"]), lo.append(a["mean"] - a["lo"]), hi.append(a["hi"] - a["mean"])
        colors.append("navy" if g == "ID" else "darkorange")
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(names) + 1), 3.6))
    ax.bar(range(len(names)), means, yerr=[lo, hi], color=colors, capsize=4)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (95% bootstrap CI)")
    s = res.sampling
    ax.set_title(f"{label}: protocol {res.protocol}, T={s.temperature}, top-p {s.top_p}", fontsize=9)
    fig.tight_layout()
    fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def write_outputs(res: EvalResult, out_dir: str | Path, plot: bool = True) -> dict[str, Path]:
    """results.json, samples.jsonl (every graded sample) and accuracy.png (if matplotlib is installed)."""
    from devenus.atomic import atomic_write, write_text_atomic

    out = Path(out_dir)
    paths = {"json": write_text_atomic(out / "results.json", json.dumps(to_json(res), indent=2) + "\n"),
             "samples": out / "samples.jsonl"}
    with atomic_write(paths["samples"]) as tmp, open(tmp, "w") as f:
        for b in res.benchmarks:
            for q in b.questions:
                f.write(json.dumps({"benchmark": b.name, "key": q.key, "target": q.target, "preds": list(q.preds),
                                    "scores": list(q.scores), "truncated": list(q.truncated),
                                    "responses": list(q.responses)}) + "\n")
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return paths  # the 'plot' extra is optional; the table and JSON carry the same numbers
        paths["plot"] = out / "accuracy.png"
        with atomic_write(paths["plot"], suffix=".png") as tmp:
            _plot(res, str(tmp), out.name)
    return paths
