"""The steps testbed (``testbed.build.STEPS``) against the default one: base accuracy, how many responses have
steps, self-checks, self-corrections and PivotTrace pivots, and each selection signal's AUROC for a wrong
majority, on a small ``devenus select`` run (generate + score) of each testbed's base model.

    flock /tmp/devenus-e2e.lock nice -n 5 python bench/testbed_steps.py [--questions 128] [--samples 4] \\
        [--window 32] [--sweep 16 64 256] [--out outputs/testbed_steps]

Builds the steps testbed on first use (SFT, minutes), then for each testbed: its candidate pool
(``testbed.pool.build_pool``: addition of 1-6 digits, none in the testbed's splits), the first ``--questions``
x ``--samples`` at T = 1 with the testbed's own answer budget, and every model signal with ``pivot_trace`` at
``score.pivot_window = --window``. The default window (256) is longer than any testbed response, so it
counts no pivot on either testbed; ``--window`` is the far-back distance scaled to these responses (about
2-3 steps of 12 tokens), ``--sweep`` re-scores the same samples at other windows. Where the pivots fall
(which kind of line, which step) is traced for ``--window`` and ``--steps-at``. Truth: the pool's hidden
answers. Writes ``bench/results/testbed_steps.json`` (commit, machine, date; ``--no-save``: print only).
"""

from __future__ import annotations

import argparse
import re
import shutil
import time
from pathlib import Path

import numpy as np

SIGNALS = ["consistency", "entropy", "self_certainty", "coe_r", "coe_c", "cot_kinetics", "pivot_trace"]


def select_run(tb, out: Path, questions: int, samples: int, window: int, signals: list[str]):
    """generate + score of ``tb``'s base model on its pool; returns the config (stages in ``out``)."""
    from devenus.select.config import load_config
    from devenus.select.stages.generate import run_generate
    from devenus.select.stages.score import run_score
    from devenus.testbed.pool import build_pool

    cfg = load_config(None, {"out": str(out), "pool": str(build_pool(tb.config)), "limit": questions, "shard_size": 64,
                             "generate.model": str(tb.model_dir), "generate.samples": samples,
                             "generate.max_new_tokens": tb.config.max_new_tokens, "score.signals": signals,
                             "score.pivot_window": window, "route.signal": "consistency"})
    run_generate(cfg, progress=False)
    run_score(cfg, progress=False)
    return cfg


def shards(st, column: str) -> list:
    import pyarrow.parquet as pq

    return [x for f in sorted(st.folder.glob("shard-*.parquet")) for x in pq.read_table(f).column(column).to_pylist()]


def measure(tb, out: Path, a) -> dict:
    from devenus.select.run import SelectionRun
    from devenus.select.score import newline_token_ids, step_starts_of
    from devenus.select.stages.score import read_questions
    from devenus.signals import auroc_interval

    t0 = time.perf_counter()
    cfg = select_run(tb, out / "w{}".format(a.window), a.questions, a.samples, a.window, SIGNALS)
    wall = time.perf_counter() - t0
    run = SelectionRun(cfg)
    gen, sco = run.stage("generate"), run.stage("score")
    _, tok = tb.load_model()
    nl = newline_token_ids(tok)
    text, ids, cut = shards(gen, "response"), shards(gen, "response_ids"), shards(gen, "truncated")
    reward = np.array(shards(sco, "sim_reward"), dtype=float)
    pivots = np.array(shards(sco, "pivot_trace"), dtype=float)
    steps = np.array([len(step_starts_of(r, nl)) for r in ids])
    wait = np.array(["wait " in t for t in text])
    check = np.array(["check " in t for t in text])
    check_holds = np.array([_check_holds(t) for t in text])
    q = read_questions(sco).to_pydict()
    wrong = np.array([x is False or x is None for x in q["sim_majority_correct"]])  # no majority counts as wrong
    p = np.array(q["sim_pass_rate"], dtype=float)

    def auc(u) -> dict:
        u = np.array([np.nan if x is None else x for x in u], dtype=float)
        v, lo, hi = auroc_interval(u, wrong, boot=a.boot)
        return {"auroc": v, "ci95": [lo, hi], "distinct": int(len(np.unique(u[np.isfinite(u)]))),
                "min": float(np.nanmin(u)), "max": float(np.nanmax(u)), "mean": float(np.nanmean(u))}

    res = {
        "testbed_key": tb.config.key(), "answer_style": tb.config.answer_style, "base_model": tb.report["base_model"],
        "base_accuracy": tb.report["base_accuracy"], "sft": {k: tb.report["sft"][k] for k in ("chosen_step", "dev_acc")},
        "select_seconds": round(wall, 1), "questions": len(p), "samples": a.samples,
        "max_new_tokens": tb.config.max_new_tokens, "mean_pass_rate": float(p.mean()),
        "wrong_majority_share": float(wrong.mean()), "cut_share": float(np.mean(cut)),
        "response_tokens_mean": float(np.mean([len(r) for r in ids])),
        "steps_mean": float(steps.mean()), "share_more_than_one_step": float((steps > 1).mean()),
        "share_more_than_two_steps": float((steps > 2).mean()),
        "share_with_check": float(check.mean()), "share_check_holds": float(check_holds.mean()),
        "share_with_self_correction": float(wait.mean()),
        "accuracy_with_self_correction": float(reward[wait].mean()) if wait.any() else None,
        "accuracy_without_self_correction": float(reward[~wait].mean()) if (~wait).any() else None,
        "pivot_window": a.window, "share_with_pivot": float((pivots > 0).mean()),
        "pivots_per_response_mean": float(pivots.mean()),
        "accuracy_with_pivot": float(reward[pivots > 0].mean()) if (pivots > 0).any() else None,
        "accuracy_without_pivot": float(reward[pivots == 0].mean()) if (pivots == 0).any() else None,
        "signals": {s: auc(q[f"u_{s}"]) for s in SIGNALS},
        # a reference, not a signal of the pipeline: the mean response length per question (long = hard here)
        "response_tokens_reference": auc(np.array([len(r) for r in ids], dtype=float).reshape(len(p), -1).mean(1).tolist()),
        "pivot_sweep": {},
        "pivot_steps": pivot_steps(tb, gen, cfg.pool, a.window),
    }
    assert res["pivot_steps"]["pivot_counts"] == pivots.astype(int).tolist()  # the score stage's own counts
    del res["pivot_steps"]["pivot_counts"]
    for w in a.sweep:  # the same samples, re-scored at another window
        dst = out / f"w{w}"
        if not (dst / "generate").exists():
            shutil.copytree(gen.folder, dst / "generate")
        c2 = select_run(tb, dst, a.questions, a.samples, w, ["consistency", "pivot_trace"])
        piv = np.array(shards(SelectionRun(c2).stage("score"), "pivot_trace"), dtype=float)
        q2 = read_questions(SelectionRun(c2).stage("score")).to_pydict()
        where = pivot_steps(tb, gen, cfg.pool, w) if w in a.steps_at else None
        if where:
            assert where.pop("pivot_counts") == piv.astype(int).tolist()
        res["pivot_sweep"][str(w)] = {"share_with_pivot": float((piv > 0).mean()), "pivots_per_response_mean": float(piv.mean()),
                                      "pivot_trace": auc(q2["u_pivot_trace"]), "pivot_steps": where}
    return res


def pivot_steps(tb, gen, pool: str, window: int, first: int = 8, history: int = 8, z: float = 2.0) -> dict:
    """Where the pivots fall: each response's far-back mass (PivotTrace's own hooks, one response per forward),
    its steps split as the scorer splits them, and the steps whose score passes PivotTrace's rule, by the
    kind of line they start (column, ``wait`` correction, ``check``, box) and by step number. The counts
    must equal the score stage's ``pivot_trace`` (asserted): this is the same rule, kept step by step."""
    import torch

    from devenus.select.forward.pivot import far_mass, pivot_layer_ids
    from devenus.generate.hf import prompt_text
    from devenus.select.score import newline_token_ids, step_starts_of
    from devenus.signals.attention import pivot_count

    model, tok = tb.load_model()
    model.eval()
    from devenus.records import read_records

    rows = {r["extra_info"]["index"]: r for r in read_records(pool)}
    nl = newline_token_ids(tok)
    layers = pivot_layer_ids(len(model.model.layers))
    kinds = ("column", "wait", "check", "box")
    steps_by, pivots_by, by_index, counts = dict.fromkeys(kinds, 0), dict.fromkeys(kinds, 0), {}, []
    for idx, ids in zip(shards(gen, "index"), shards(gen, "response_ids")):
        p = tok(prompt_text(tok, rows[idx]["prompt"]))["input_ids"]
        x = torch.tensor([p + list(ids)])
        masses = []
        hooks = [model.model.layers[li].self_attn.register_forward_pre_hook(
            lambda mod, args, kwargs: masses.append(far_mass(mod, args, kwargs, torch.ones_like(x), window, 256)),
            with_kwargs=True) for li in layers]
        with torch.no_grad():
            model(input_ids=x)
        for hk in hooks:
            hk.remove()
        m = torch.stack(masses).float().mean(0)[0, len(p):].numpy()
        starts = step_starts_of(ids, nl)
        scores = [float(m[a: min(a + first, m.size if i + 1 == len(starts) else starts[i + 1])].mean())
                  for i, a in enumerate(starts) if a < m.size]
        texts = [tok.decode(ids[a: starts[i + 1] if i + 1 < len(starts) else len(ids)]) for i, a in enumerate(starts)]
        kind = ["wait" if t.startswith("wait") else "check" if t.startswith("check") else
                "box" if t.startswith("\\boxed") else "column" for t in texts]
        n = 0
        for i in range(len(scores)):
            steps_by[kind[i]] += i >= 2  # steps that can be pivots (two earlier steps needed)
            prev = np.asarray(scores[max(0, i - history): i])
            if i >= 2 and scores[i] > prev.mean() + z * prev.std():
                n += 1
                pivots_by[kind[i]] += 1
                by_index[i] = by_index.get(i, 0) + 1
        assert n == pivot_count(m, starts, first, history, z)
        counts.append(n)
    total = max(sum(pivots_by.values()), 1)
    return {"window": window, "pivots": sum(pivots_by.values()), "pivot_counts": counts,
            "eligible_steps_by_kind": steps_by, "pivots_by_kind": pivots_by,
            "pivot_rate_by_kind": {k: pivots_by[k] / steps_by[k] if steps_by[k] else None for k in kinds},
            "pivots_by_step_number": {str(k): v for k, v in sorted(by_index.items())},
            "share_of_pivots_at_first_eligible_step": by_index.get(2, 0) / total}


_CHECK = re.compile(r"check (\d+)-(\d+)=(\d+)")


def _check_holds(text: str) -> bool:
    """The response's check line is true arithmetic (S - b = a as written)."""
    m = _CHECK.search(text)
    return bool(m) and int(m.group(1)) - int(m.group(2)) == int(m.group(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=128)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--window", type=int, default=32, help="score.pivot_window of the main run")
    ap.add_argument("--sweep", type=int, nargs="*", default=[16, 64, 256], help="other windows, same samples")
    ap.add_argument("--steps-at", type=int, nargs="*", default=[64], help="sweep windows whose pivots are also "
                                                                             "located step by step")
    ap.add_argument("--out", default="outputs/testbed_steps")
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--testbeds", nargs="+", default=["steps", "default"], choices=["steps", "default"])
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()

    import torch

    from devenus.testbed import TestbedConfig, build_testbed
    from devenus.testbed.build import STEPS

    torch.set_num_threads(1)
    out = {}
    for name in a.testbeds:
        cfg = {"steps": STEPS, "default": TestbedConfig()}[name]
        t0 = time.perf_counter()
        tb = build_testbed(cfg, log=lambda s: print(s, flush=True))
        print(f"[{name}] testbed {tb.root} ({time.perf_counter() - t0:.0f} s)", flush=True)
        out[name] = measure(tb, Path(a.out) / name, a)
        r = out[name]
        print(f"[{name}] pass rate {r['mean_pass_rate']:.3f}, wrong majority {r['wrong_majority_share']:.3f}; steps "
              f"{r['steps_mean']:.2f}/response, >1 step {r['share_more_than_one_step']:.3f}; check {r['share_with_check']:.3f}, "
              f"self-correction {r['share_with_self_correction']:.3f}; pivot (w={a.window}) {r['share_with_pivot']:.3f}")
        for s, v in r["signals"].items():
            print(f"  {s:<15} AUROC {v['auroc']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]  distinct {v['distinct']}")
        v = r["response_tokens_reference"]
        print(f"  {'(length)':<15} AUROC {v['auroc']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]  mean response tokens")
        ps = r["pivot_steps"]
        print(f"  pivots (w={a.window}) by kind {ps['pivots_by_kind']} of eligible steps {ps['eligible_steps_by_kind']}; "
              f"at the first eligible step {ps['share_of_pivots_at_first_eligible_step']:.3f}")
        for w, v in r["pivot_sweep"].items():
            pt = v["pivot_trace"]
            print(f"  pivot w={w:<4} share {v['share_with_pivot']:.3f}  AUROC {pt['auroc']:.3f} "
                  f"[{pt['ci95'][0]:.3f}, {pt['ci95'][1]:.3f}]  distinct {pt['distinct']}"
                  + (f"; pivot rate by kind {v['pivot_steps']['pivot_rate_by_kind']}" if v["pivot_steps"] else ""))
    if not a.no_save:
        from _results import write_result

        print(write_result("testbed_steps", {"args": vars(a), **out}))


if __name__ == "__main__":
    main()
