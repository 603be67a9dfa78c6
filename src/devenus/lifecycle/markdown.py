"""The lifecycle's Markdown report: one row per finished round (its JSON report has every number)."""

from __future__ import annotations

from pathlib import Path

from devenus.lifecycle.config import LifecycleConfig


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def markdown(reports: list[dict]) -> str:
    splits = sorted({s for r in reports for s in r.get("held_out", {})}, key=lambda s: (s != "ID", s))
    head = ["round", "D(k)", "labeled / rows", "proposals", "accepted", "precision", "recall", "D(k+1) labeled",
            *[f"held-out {s}" for s in splits], "round s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in reports:
        t, b, a = r["transition"], r["before"], r["after"]
        cells = [str(r["round"]), r["data"], f"{b['labeled']} / {b['rows']}", str(t["proposals"]), str(t["accepted"]),
                 _f(t["precision"]), _f(t["recall"]), f"{a['labeled']} / {a['rows']}",
                 *[_f(r["held_out"].get(s)) for s in splits], str(r.get("round_wall_s"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(cfg: LifecycleConfig, reports: list[dict]) -> Path:
    from devenus.atomic import write_text_atomic

    path = Path(cfg.out_dir) / "report.md"
    text = (f"# Lifecycle: {cfg.method} (rule {cfg.rule}), {cfg.rounds} rounds x {cfg.steps_per_round} steps\n\n"
            "precision: accepted changes whose new target is the hidden answer; recall: over the rows the rule "
            "could fix. Held-out: verl's validation at the round's last step.\n\n" + markdown(reports))
    write_text_atomic(path, text)
    return path
