"""Can training on the steps testbed's RL pool move its OOD splits? A verifier-driven stand-in for RL, small
enough for this CPU: rejection-sampling fine-tuning (sample the base model on RL-pool questions, keep the
responses the verifier passes, fine-tune on them: expert iteration, the RL signal without the policy
gradient). Held-out accuracy before and after, paired per question, for ID and each OOD family.

    flock /tmp/devenus-e2e.lock nice -n 5 python bench/testbed_steps_transfer.py [--pool 512] [--steps 60]

RL pool questions only (``train``: d in {2, 3, 4}); ``add_long`` (d = 5) is never trained on here, as in RL.
Writes ``bench/results/testbed_steps_transfer.json`` (commit, machine, date; ``--no-save``: print only).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pool", type=int, default=512, help="RL-pool questions sampled")
    ap.add_argument("--samples", type=int, default=4, help="samples per pool question")
    ap.add_argument("--steps", type=int, default=60, help="fine-tuning steps on the kept responses")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--eval-questions", type=int, default=128, help="per held-out group")
    ap.add_argument("--eval-samples", type=int, default=4)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()

    import torch

    from devenus.testbed import tasks
    from devenus.testbed.build import STEPS, build_testbed, question_sets
    from devenus.testbed.evaluate import accuracy
    from devenus.testbed.sampling import sample
    from devenus.testbed.sft import SFTConfig, train_sft
    from devenus.verify import grade

    torch.set_num_threads(1)
    tb = build_testbed(STEPS, log=lambda s: None)
    model, tok = tb.load_model()
    qs = question_sets(STEPS)
    groups = {"ID": qs["test_id"]} | {f"OOD/{f}": [q for q in qs["test_ood"] if q.family == f] for f in STEPS.ood_families}
    groups = {k: v[: a.eval_questions] for k, v in groups.items()}

    def evaluate(m) -> dict[str, np.ndarray]:
        return {k: np.array(accuracy(m, tok, [q.text() for q in g], [q.answer for q in g], a.eval_samples, 1.0,
                                     STEPS.max_new_tokens, seed=7).per_question) for k, g in groups.items()}

    t0 = time.perf_counter()
    before = evaluate(model)
    pool = qs["train"][: a.pool]
    outs = sample(model, tok, [q.text() for q in pool], a.samples, 1.0, STEPS.max_new_tokens, seed=3)
    kept = [tasks.Question(q.family, q.difficulty, q.key, q.answer, {v: q.text() for v in tasks.VIEWS},
                           {v: c.text for v in tasks.VIEWS})
            for q, cs in zip(pool, outs) for c in cs if grade(c.text, q.answer, truncated=c.truncated).score == 1.0]
    print(f"kept {len(kept)} of {len(pool) * a.samples} sampled responses ({time.perf_counter() - t0:.0f} s)", flush=True)
    cfg = SFTConfig(max_steps=a.steps, batch_size=32, lr=a.lr, warmup_steps=5, min_steps=a.steps, eval_every=a.steps,
                    lo=0.0, hi=2.0)
    res = train_sft(model, tok, kept, cfg, seed=0, dev_accuracy=lambda m: 0.0)
    model.load_state_dict(res.state_dict)
    after = evaluate(model)
    rows = {}
    for k in groups:
        d = after[k] - before[k]
        half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
        rows[k] = {"n": len(d), "before": float(before[k].mean()), "after": float(after[k].mean()),
                   "diff": float(d.mean()), "ci95": [float(d.mean() - half), float(d.mean() + half)]}
        print(f"{k:<14} {rows[k]['before']:.3f} -> {rows[k]['after']:.3f}  diff {rows[k]['diff']:+.3f} "
              f"[{rows[k]['ci95'][0]:+.3f}, {rows[k]['ci95'][1]:+.3f}]")
    if not a.no_save:
        from _results import write_result

        print(write_result("testbed_steps_transfer", {
            "args": vars(a), "testbed_key": STEPS.key(), "base_model": tb.report["base_model"]["hash"],
            "kept": len(kept), "sampled": len(pool) * a.samples, "seconds": round(time.perf_counter() - t0, 1),
            "groups": rows}))


if __name__ == "__main__":
    main()
