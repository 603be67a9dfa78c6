"""Each selection signal's AUROC for predicting a wrong majority and a zero-variance group, with a bootstrap
95% interval over questions; and each stage's wall time.

    python bench/select_signal_auroc.py [--questions 128] [--samples 8] [--out outputs/select_auroc]
    python bench/select_signal_auroc.py --model smollm2 --pool POOL.parquet --samples 4 --max-new-tokens 48 \\
        --out outputs/selauroc/select --png docs/selection/auroc_smollm2.png

The table goes to ``bench/results/select_signal_auroc.json`` (``select_signal_auroc_<model>.json`` for
another model; commit, machine, date; ``--no-save``: not), the picture to ``--png`` where given: each signal's two
AUROCs side by side, ``constant`` written for a signal that does not vary (``devenus select report``'s AUROC
picture). ``--redraw`` draws it again from the results file of ``--model`` alone (no run).

Runs ``devenus select`` generate + score (resumable: a rerun, or a ``devenus select`` run made with the same
settings in ``--out``, reuses the shards; see bench/select_signal_auroc_smollm2.yaml), then reads the
per-question table. Truth: the pool's labels for a records Parquet (``--pool``), the testbed pool's hidden
answers otherwise. Targets: "wrong majority" = the majority answer is not the truth (no majority counts as
wrong); "zero-variance group" = every sample of the question got the same reward (pass rate 0 or 1: no
GRPO/TTRL advantage). Each target's class balance is reported beside its AUROCs. The reference point is
chance (0.5); a signal under 0.5 ranks the wrong way round (what ``route.calibrate_sign`` fixes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def targets(majority_correct, pass_rate) -> dict[str, np.ndarray]:
    """Per question with a truth (``majority_correct`` not None, e.g. a labeled row): the two positives, from
    ``majority_correct`` and ``pass_rate``; and ``truth``, the mask of those questions."""
    mc = np.array([np.nan if x is None else float(x) for x in majority_correct])
    p = np.array([np.nan if x is None else x for x in pass_rate], dtype=float)
    t = np.isfinite(mc)
    return {"truth": t, "wrong_majority": mc[t] == 0.0, "zero_variance": (p[t] == 0.0) | (p[t] == 1.0)}


def as_report(rows: list[dict], balance: dict[str, float], questions: int) -> dict:
    """The table in the shape of ``devenus select report``'s, so that its AUROC picture draws it. An entry is a
    constant signal's where its note says so or, in a results file written without notes, where its AUROC
    and whole interval are 0.5 (a signal that varies does not tie in every bootstrap resample)."""
    from devenus.select.report import CONSTANT

    def entry(r: dict) -> dict:
        note = r.get("note") or (CONSTANT if r["auroc"] == 0.5 and list(r["ci95"]) == [0.5, 0.5] else None)
        return {"auroc": r["auroc"], "ci95": r["ci95"], **({"note": note} if note else {})}

    signals = {}
    for r in rows:
        w = entry(r["wrong_majority"])
        signals[r["signal"]] = {"auroc_wrong_majority": w.pop("auroc"), **w, "zero_variance": entry(r["zero_variance"])}
    return {"questions": questions, "signals": signals,
            "wrong_majority_share": balance["wrong_majority"], "zero_variance_share": balance["zero_variance"]}


def draw(rows: list[dict], balance: dict[str, float], questions: int, title: str, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from devenus.select.report import draw_auroc

    fig, ax = plt.subplots(figsize=(7, 3.8))
    draw_auroc(ax, as_report(rows, balance, questions), title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def redraw(model: str, png: str | None) -> None:
    """The picture again from the committed results file alone (to ``png``, or where the run drew it)."""
    import json
    from pathlib import Path

    name = "select_signal_auroc" if model == "testbed" else f"select_signal_auroc_{model}"
    r = json.loads((Path(__file__).resolve().parent / "results" / f"{name}.json").read_text())["result"]
    path = png or r["args"]["png"]
    balance = {"wrong_majority": r["wrong_majority_share"], "zero_variance": r["zero_variance_share"]}
    title = f"{model}: {r['questions']} questions x {r['args']['samples']} samples, mean pass rate {r['mean_pass_rate']:.3f}"
    draw(r["signals"], balance, r["questions"], title, path)
    print(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="testbed", help="generate.model: testbed, smollm2 or a model folder")
    ap.add_argument("--pool", default=None, help="a labeled records Parquet (default: the testbed pool)")
    ap.add_argument("--questions", type=int, default=None, help="the first N (default: 128 of the testbed "
                                                                "pool, all of --pool)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the select config's")
    ap.add_argument("--out", default="outputs/select_auroc")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--png", default=None, help="draw the AUROCs here")
    ap.add_argument("--no-save", action="store_true", help="print the table only")
    ap.add_argument("--redraw", action="store_true", help="draw the picture from --model's results file only")
    a = ap.parse_args()
    if a.redraw:
        return redraw(a.model, a.png)

    import pyarrow.parquet as pq
    import torch

    from devenus.select.config import MODEL_SIGNALS, load_config
    from devenus.select.stages import SelectionRun, run_generate, run_score
    from devenus.select.report import auroc_note
    from devenus.select.stages.score import read_questions
    from devenus.signals import auroc_interval

    torch.set_num_threads(1)
    signals = ["consistency", *MODEL_SIGNALS]
    limit = a.questions if a.questions is not None or a.pool else 128
    sets = {"out": a.out, "limit": limit, "shard_size": 32, "generate.model": a.model,
            "generate.samples": a.samples, "score.signals": signals, "route.signal": "consistency"}
    if a.pool:
        sets["pool"] = a.pool
    if a.max_new_tokens is not None:
        sets["generate.max_new_tokens"] = a.max_new_tokens
    cfg = load_config(None, sets)
    t0 = time.perf_counter()
    run = SelectionRun(cfg)
    run_generate(run, progress=False)
    t1 = time.perf_counter()
    run_score(run, progress=False)
    t2 = time.perf_counter()
    q = read_questions(run.stage("score")).to_pydict()
    pre = "" if a.pool else "sim_"
    y = targets(q[f"{pre}majority_correct"], q[f"{pre}pass_rate"])
    truth = y.pop("truth")
    p = np.array(q[f"{pre}pass_rate"], dtype=float)[truth]
    n = len(p)
    cut = np.concatenate([pq.read_table(f).column("truncated").to_numpy(zero_copy_only=False)
                          for f in sorted(run.stage("generate").folder.glob("shard-*.parquet"))])
    no_answer = np.concatenate([np.array([x is None for x in pq.read_table(f).column("pred").to_pylist()])
                                for f in sorted(run.stage("score").folder.glob("shard-*.parquet"))])
    balance = {t: float(v.mean()) for t, v in y.items()}
    print(f"{n} questions with a truth x {a.samples} samples ({a.model}): generate {t1 - t0:.0f} s, score {t2 - t1:.0f} s "
          "(0 s = reused shards)")
    print(f"mean pass rate {p.mean():.3f}; wrong majority {balance['wrong_majority']:.3f} of questions, "
          f"zero-variance group {balance['zero_variance']:.3f}; samples cut at the token limit {cut.mean():.3f}, "
          f"with no answer {no_answer.mean():.3f}")
    print(f"{'signal':<16} {'AUROC wrong majority':>28}  {'AUROC zero variance':>28}")
    rows = []
    for s in signals:
        u = np.array([np.nan if x is None else x for x in q[f"u_{s}"]], dtype=float)[truth]
        row = {"signal": s}
        for t, pos in y.items():
            auc, lo, hi = auroc_interval(u, pos, boot=a.boot)
            note = auroc_note(u, pos)
            row[t] = {"auroc": auc, "ci95": [lo, hi], **({"note": note} if note else {})}
        rows.append(row)
        print(f"{s:<16} " + "  ".join(f"{row[t]['auroc']:6.3f} [{row[t]['ci95'][0]:.3f}, {row[t]['ci95'][1]:.3f}]"
                                      .rjust(28) for t in y))
    if a.png:
        draw(rows, balance, n, f"{a.model}: {n} questions x {a.samples} samples, mean pass rate {p.mean():.3f}", a.png)
        print(a.png)
    if not a.no_save:
        from _results import write_result

        name = "select_signal_auroc" if a.model == "testbed" else f"select_signal_auroc_{a.model}"
        print(write_result(name, {
            "args": vars(a), "questions": n, "pool": cfg.pool, "generate": cfg.generate_identity()["generate"],
            "mean_pass_rate": float(p.mean()), "wrong_majority_share": balance["wrong_majority"],
            "zero_variance_share": balance["zero_variance"], "cut_share": float(cut.mean()),
            "no_answer_share": float(no_answer.mean()), "generate_s": round(t1 - t0, 1),
            "score_s": round(t2 - t1, 1), "signals": rows}))


if __name__ == "__main__":
    main()
