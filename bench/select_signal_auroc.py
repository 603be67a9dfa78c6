"""Each selection signal's AUROC for predicting a wrong majority on the testbed pool (simulation truth),
with a bootstrap 95% interval over questions; and each stage's wall time.

    python bench/select_signal_auroc.py [--questions 128] [--samples 8] [--out outputs/select_auroc]

The table also goes to ``bench/results/select_signal_auroc.json`` (commit, machine, date; ``--no-save``: not).

Runs ``devenus select`` generate + score on the first N pool questions (resumable: a rerun reuses the
shards), then reads the per-question table: "wrong majority" = the majority answer is not the hidden
answer (no majority counts as wrong). The reference point is chance (0.5); a signal under 0.5 ranks the
wrong way round (what ``route.calibrate_sign`` fixes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=128)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--out", default="outputs/select_auroc")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--no-save", action="store_true", help="print the table only")
    a = ap.parse_args()

    import torch

    from devenus.select.config import MODEL_SIGNALS, load_config
    from devenus.select.pipeline import read_questions, run_generate, run_score
    from devenus.select.work import stage
    from devenus.signals import auroc

    torch.set_num_threads(1)
    signals = ["consistency", *MODEL_SIGNALS]
    cfg = load_config(None, {"out": a.out, "limit": a.questions, "shard_size": 32, "generate.samples": a.samples,
                             "score.signals": signals, "route.signal": "consistency"})
    t0 = time.perf_counter()
    run_generate(cfg, progress=False)
    t1 = time.perf_counter()
    run_score(cfg, progress=False)
    t2 = time.perf_counter()
    q = read_questions(stage(cfg, "score")).to_pydict()
    wrong = np.array([not bool(x) for x in q["sim_majority_correct"]])
    p = np.array(q["sim_pass_rate"], dtype=float)
    print(f"{a.questions} pool questions x {a.samples} samples: generate {t1 - t0:.0f} s, score {t2 - t1:.0f} s "
          "(0 s = reused shards)")
    print(f"wrong majority: {wrong.mean():.3f} of questions; mean pass rate {p.mean():.3f}")
    rng = np.random.default_rng(0)
    print(f"{'signal':<16} {'AUROC':>6}  95% bootstrap CI")
    rows = []
    for s in signals:
        u = np.array([np.nan if x is None else x for x in q[f"u_{s}"]], dtype=float)
        auc = auroc(u, wrong)
        boots = []
        for _ in range(a.boot):
            i = rng.integers(0, len(u), len(u))
            b = auroc(u[i], wrong[i])
            if np.isfinite(b):
                boots.append(b)
        lo, hi = np.percentile(boots, [2.5, 97.5])
        print(f"{s:<16} {auc:6.3f}  [{lo:.3f}, {hi:.3f}]")
        rows.append({"signal": s, "auroc": float(auc), "ci95": [float(lo), float(hi)]})
    if not a.no_save:
        from _results import write_result

        print(write_result("select_signal_auroc", {
            "args": vars(a), "wrong_majority_share": float(wrong.mean()), "mean_pass_rate": float(p.mean()),
            "generate_s": round(t1 - t0, 1), "score_s": round(t2 - t1, 1), "signals": rows}))


if __name__ == "__main__":
    main()
