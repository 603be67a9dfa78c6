"""``devenus select report``: how well each signal ranks the pool, and what routing did.

From a scored (and optionally routed) run: per signal, the calibration curve (windowed pass rate and
majority correctness against the uncertainty rank, triage thresholds marked when the run was triaged
on that signal), each signal's AUROC for predicting a wrong majority with a bootstrap 95% interval, and
the routing summary. The truth is the pool's labels where rows have them, else the simulation truth
(the testbed's hidden answers): a diagnostic, never an input to routing. Writes ``report.json`` and
PNG pictures (matplotlib, the ``plot`` extra) into ``<run>/report/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def _floats(values: list) -> np.ndarray:
    """A question column as float64, None -> NaN."""
    return np.array([np.nan if x is None else float(x) for x in values], float)


def _truth(q: dict[str, list]) -> tuple[np.ndarray, np.ndarray, str]:
    """(pass rate, majority correct) per question, and which truth they come from."""
    if any(x is not None for x in q["majority_correct"]):
        return _floats(q["pass_rate"]), _floats(q["majority_correct"]), "labels"
    return _floats(q["sim_pass_rate"]), _floats(q["sim_majority_correct"]), "simulation"


def auroc_note(u: np.ndarray, wrong: np.ndarray, what: tuple[str, str, str] = ("majorities", "wrong", "right")
               ) -> str | None:
    """Why a signal's AUROC says nothing (None: it is a ranking's): one class only makes it undefined (NaN), a
    constant signal makes it 0.5 by ties alone. ``what``: (the items, the positive class, the negative one)."""
    from devenus.select.route.router import signal_spread

    if wrong.all() or not wrong.any():
        return (f"undefined: one class only (every one of the {len(wrong)} {what[0]} is "
                f"{what[1] if wrong.all() else what[2]})")
    spread, distinct = signal_spread(u)
    if distinct < 2:
        return f"{CONSTANT}: every question has the same value (0.5 is the ties' value, not a ranking)"
    return None


#: how :func:`auroc_note` begins for a signal that does not vary: it ranks nothing, so it has no AUROC
CONSTANT = "constant signal"


def auroc_mark(s: dict[str, Any], key: str = "auroc_wrong_majority") -> str | None:
    """What stands instead of an AUROC that says nothing: ``constant`` (the signal does not vary; the 0.5 in
    ``report.json`` is the ties' value), ``undefined`` (NaN); None for a real AUROC."""
    if (s.get("note") or "").startswith(CONSTANT):
        return "constant"
    return None if np.isfinite(s[key]) else "undefined"


def _auroc_text(s: dict[str, Any], key: str = "auroc_wrong_majority") -> str:
    if auroc_mark(s, key):
        return s.get("note", "undefined")
    a, (lo, hi) = s[key], s["ci95"]
    text = f"{a:6.3f}  [{lo:.3f}, {hi:.3f}]"
    return f"{text}  ({s['note']})" if s.get("note") else text


def _auroc_with_interval(u: np.ndarray, positive: np.ndarray, rng, boot: int) -> tuple[float, list[float]]:
    """AUROC of ``u`` for ``positive`` and its bootstrap 95% interval (NaN where undefined)."""
    from devenus.signals import auroc
    from devenus.signals.group import bootstrap_auroc_interval

    return auroc(u, positive), list(bootstrap_auroc_interval(u, positive, rng, boot))


def zero_variance_entry(u: np.ndarray, pass_rate: np.ndarray, rng, boot: int) -> dict[str, Any]:
    """The signal's AUROC for "the question's group has zero variance" (truth pass rate 0 or 1: all samples
    right or all wrong, GRPO learns nothing from it), its interval, class counts and, where it says nothing,
    why. A signal that ranks easy and hard zero-variance questions at opposite ends scores near 0.5 here
    while being useful: read it beside the wrong-majority AUROC."""
    keep = np.isfinite(u) & np.isfinite(pass_rate)
    uu, zv = u[keep], (pass_rate[keep] <= 0.0) | (pass_rate[keep] >= 1.0)
    out: dict[str, Any] = {"classes": {"zero_variance": int(zv.sum()), "with_variance": int((~zv).sum())}}
    if keep.sum() < 2:
        return {**out, "auroc": float("nan"), "ci95": [float("nan")] * 2,
                "note": f"undefined: {int(keep.sum())} question(s) with this signal and a pass rate (< 2)"}
    out["auroc"], out["ci95"] = _auroc_with_interval(uu, zv, rng, boot)
    note = auroc_note(uu, zv, ("groups", "zero-variance", "with variance"))
    return {**out, **({"note": note} if note else {})}


def windowed(y: np.ndarray, w: int) -> np.ndarray:
    return np.convolve(y, np.ones(w) / w, mode="valid")


def build_report(cfg, boot: int = 1000) -> dict[str, Any]:
    from devenus.select.run import SelectionRun
    from devenus.select.stages.score import read_questions

    run = SelectionRun(cfg)
    st = run.stage("score").check().require_done("report")
    q = read_questions(st).to_pydict()
    pass_rate, majority_correct, truth = _truth(q)
    ok = np.isfinite(majority_correct)
    if not ok.any():
        raise ValueError("report needs a truth: labeled rows or simulation answers in the pool")
    wrong = majority_correct == 0.0
    n = int(ok.sum())
    w = max(5, n // 10)
    rng = np.random.default_rng(0)
    signals: dict[str, Any] = {}
    for s in cfg.score.signals:
        u = _floats(q[f"u_{s}"])
        keep = ok & np.isfinite(u)
        if keep.sum() < 2:
            signals[s] = {"auroc_wrong_majority": float("nan"), "ci95": [float("nan")] * 2, "questions": int(keep.sum()),
                          "classes": {"wrong": int(wrong[keep].sum()), "right": int((~wrong[keep]).sum())},
                          "note": f"undefined: {int(keep.sum())} question(s) with this signal and a truth (< 2)",
                          "zero_variance": zero_variance_entry(u[keep], pass_rate[keep], rng, boot)}
            continue
        uu, ww, pp, mm = u[keep], wrong[keep], pass_rate[keep], majority_correct[keep]
        auc, (lo, hi) = _auroc_with_interval(uu, ww, rng, boot)
        note = auroc_note(uu, ww)
        order = np.argsort(uu, kind="stable")
        ww_ = min(w, len(uu))
        signals[s] = {"auroc_wrong_majority": auc, "ci95": [lo, hi], "questions": int(keep.sum()),
                      "classes": {"wrong": int(ww.sum()), "right": int((~ww).sum())},
                      "zero_variance": zero_variance_entry(uu, pp, rng, boot),
                      "curve": {"rank": (np.arange(len(uu) - ww_ + 1) + (ww_ - 1) / 2).tolist(),
                                "u": windowed(uu[order], ww_).tolist(),
                                "pass_rate": windowed(pp[order], ww_).tolist(),
                                "majority_correct": windowed(mm[order], ww_).tolist()}, "window": ww_}
        if note:
            signals[s]["note"] = note
    pr = pass_rate[ok & np.isfinite(pass_rate)]
    rep: dict[str, Any] = {"truth": truth, "questions": n, "wrong_majority_share": float(wrong[ok].mean()),
                           "zero_variance_share": float(((pr <= 0.0) | (pr >= 1.0)).mean()) if len(pr) else float("nan"),
                           "signals": signals}
    rst = run.stage("route")
    if rst.done:
        rep["routing"] = {k: v for k, v in rst.summary().items()}
    return rep


def rank_cuts(routing: dict[str, Any], signal: str, n: int) -> list[tuple[float, str, str]]:
    """The ratio selector's cut points on the uncertainty rank of ``signal`` (0 = most certain): it discards
    the ``discard`` least uncertain and annotates the ``annotate`` most uncertain of the ``n`` questions, so
    the cuts sit at rank ``discard`` and ``n - annotate`` (a budget's overflow goes weak from the top's least
    uncertain end, so the annotated are still the most uncertain). Empty for other selectors (they mark
    thresholds) or another signal."""
    counts = routing.get("counts") or {}
    if routing.get("selector") != "ratio" or routing.get("signal") != signal or not counts:
        return []
    top = n - counts.get("annotate", 0)
    return [(float(counts.get("discard", 0)), f"discard | weak (rank {counts.get('discard', 0)})", "--"),
            (float(top), f"weak | annotate (rank {top})", ":")]


def draw(rep: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    sig = rep["signals"]
    routing = rep.get("routing", {})
    for name, s in sig.items():
        if "curve" not in s:  # (fewer than 2 questions: nothing to draw; report.json and the table say why)
            continue
        fig, ax = plt.subplots(figsize=(6, 3.6))
        c = s["curve"]
        ax.plot(c["rank"], c["pass_rate"], label="pass rate")
        ax.plot(c["rank"], c["majority_correct"], label="majority correct")
        ax.set_xlabel(f"uncertainty rank (0 = most certain), window {s['window']}")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{name}: AUROC(wrong majority) {_auroc_text(s)}", fontsize=8)
        if routing.get("signal") == name and "thresholds" in routing:
            u = np.asarray(c["u"])
            for t, label, style in ((routing["thresholds"]["t_discard"], "t_discard", "--"),
                                    (routing["thresholds"]["t_annotate"], "t_annotate", ":")):
                if np.isfinite(t) and len(u):
                    x = float(np.interp(t * routing.get("sign", 1), u, c["rank"]))
                    ax.axvline(x, color="k", linestyle=style, label=label)
        for x, label, style in rank_cuts(routing, name, len(c["rank"]) + s["window"] - 1):
            ax.axvline(x, color="k", linestyle=style, label=label)
        ax.legend(fontsize=8)
        paths.append(_save(plt, fig, out / f"calibration_{name}.png"))
    fig, ax = plt.subplots(figsize=(7, 3.8))
    draw_auroc(ax, rep)
    paths.append(_save(plt, fig, out / "auroc.png"))
    if routing.get("counts"):
        fig, ax = plt.subplots(figsize=(4.5, 3))
        ax.bar(list(routing["counts"]), list(routing["counts"].values()))
        ax.set_title(f"routing: {routing['selector']} on {routing['signal']}", fontsize=9)
        paths.append(_save(plt, fig, out / "routing.png"))
    return paths


def auroc_bars(rep: dict[str, Any]) -> list[tuple[str, float, list[dict[str, Any]]]]:
    """The AUROC picture's data: per target (``wrong majority``, ``zero-variance group``) its label, the share
    of questions it holds, and per signal ``{"signal", "auroc", "ci95", "mark"}`` (the AUROC NaN where a
    :func:`auroc_mark` stands instead: a constant signal has no bar, not one at 0.5)."""
    nan = float("nan")
    out = []
    # (label, the share's key in the report, where a signal's entry is: itself or a sub-entry, the AUROC's key)
    for label, share, sub, key in (("wrong majority", "wrong_majority_share", None, "auroc_wrong_majority"),
                                   ("zero-variance group", "zero_variance_share", "zero_variance", "auroc")):
        bars = []
        for name, s in rep["signals"].items():
            e = s if sub is None else s[sub]
            mark = auroc_mark(e, key)
            bars.append({"signal": name, "auroc": nan if mark else e[key], "ci95": [nan, nan] if mark else e["ci95"],
                         "mark": mark})
        out.append((label, rep.get(share, nan), bars))
    return out


def draw_auroc(ax, rep: dict[str, Any], title: str | None = None) -> None:
    """Each signal's AUROC for a wrong majority and, beside it, for a zero-variance group, with their 95%
    intervals; ``constant`` or ``undefined`` written where an AUROC that says nothing would stand. ``title``:
    default, the question count and the truth."""
    width = 0.38
    targets = auroc_bars(rep)
    x = np.arange(len(rep["signals"]))
    for j, (label, share, bars) in enumerate(targets):
        pos = x + (j - 0.5) * width
        a = np.array([b["auroc"] for b in bars])
        ci = np.array([b["ci95"] for b in bars])
        ax.bar(pos, a, width, yerr=[a - ci[:, 0], ci[:, 1] - a], capsize=2, color=f"C{j}",
               label=f"{label} ({share:.0%} of questions)")
        for p, b in zip(pos, bars):
            if b["mark"]:
                ax.text(p, 0.03, b["mark"], rotation=90, ha="center", va="bottom", fontsize=7)
    ax.axhline(0.5, color="k", linewidth=0.8)
    ax.set_xticks(x, list(rep["signals"]), rotation=30, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.6, len(x) - 0.4)  # a bar-less signal at the end keeps its room (NaN bars set no limits)
    ax.set_ylabel("AUROC (95% bootstrap CI)")
    ax.set_ylim(0, 1)
    # above the bars (an AUROC and its interval reach 1): the title sits over the legend
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    ax.set_title(title or f"{rep['questions']} questions, truth: {rep['truth']}", fontsize=9, pad=18)


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_report(cfg, out: str | Path | None = None, pictures: bool = True) -> tuple[dict[str, Any], list[Path]]:
    from devenus.select.shards import write_json

    folder = Path(out) if out else Path(cfg.out) / "report"
    folder.mkdir(parents=True, exist_ok=True)
    rep = build_report(cfg)
    write_json(rep, folder / "report.json")
    paths = draw(rep, folder) if pictures else []
    return rep, paths


def summary_lines(rep: dict[str, Any]) -> list[str]:
    lines = [f"{rep['questions']} questions (truth: {rep['truth']}); wrong majority {rep['wrong_majority_share']:.3f}; "
             f"zero-variance groups {rep.get('zero_variance_share', float('nan')):.3f}",
             f"{'signal':<16} {'AUROC':>6}  95% CI (wrong majority)  |  AUROC  95% CI (zero-variance group)"]
    for k, s in rep["signals"].items():
        c, z = s.get("classes", {}), s.get("zero_variance")
        text = f"{k:<16} {_auroc_text(s)}  (wrong {c.get('wrong', '?')} / right {c.get('right', '?')})"
        if z:
            zc = z["classes"]
            text += (f"  |  {_auroc_text(z, 'auroc')}  (zero-variance {zc['zero_variance']} / "
                     f"with variance {zc['with_variance']})")
        lines.append(text)
    if "routing" in rep:
        lines.append(f"routing ({rep['routing']['selector']} on {rep['routing']['signal']}): {rep['routing']['counts']}")
    return lines


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps({"usage": "devenus select report CONFIG"}))
