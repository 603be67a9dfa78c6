"""DE-Venus's majority vote against the reference implementations' vote rules, on the testbed's own samples.

    python bench/reference_votes.py [--questions 200] [--votes 4 8 16]

The testbed's base model samples N responses (T=1) to each of the first ``--questions`` training
questions; DE-Venus's extractor reads every answer (None: no answer, or truncated). The same answers
then go through three vote rules, so only the rule differs, not the extraction:

  devenus       equivalence clusters, abstentions never win, a tie gives no target
                (:func:`devenus.verify.majority_vote`)
  ttrl-ref      PRIME-RL/TTRL (verl/verl/utils/reward_score/ttrl/ttt_metrics.py): ``Counter`` over the
                extracted strings, a response without an answer counts as "" (its extractor returns ""),
                first-seen answer wins a tie
  corew-ref     tmlr-group/Co-rewarding (Co-rewarding-I/verl/workers/reward_manager/co_reward.py):
                ``Counter`` over the strings with empty answers dropped, first-seen answer wins a tie

Reported per N: the share of questions that get a target, the share whose target is "" (no answer),
the target's accuracy against the gold answer (equivalence), and how often the rule's target differs
from DE-Venus's. The 95% CI of a share over 200 questions is about +-0.07. The table also goes to
``bench/results/reference_votes.json`` (commit, machine, date; ``--no-save``: not).
"""

from __future__ import annotations

import argparse
from collections import Counter


def ttrl_ref(answers):
    counts = Counter("" if a is None else a for a in answers)
    return counts.most_common(1)[0][0]  # max() keeps the first-seen of equal counts


def corew_ref(answers):
    kept = [a for a in answers if a is not None and a.strip() != ""]
    return Counter(kept).most_common(1)[0][0] if kept else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--votes", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-save", action="store_true", help="print the table only")
    args = ap.parse_args()

    from devenus.records import read_records
    from devenus.testbed import build_testbed
    from devenus.testbed.sampling import sample
    from devenus.verify import extract_answer, get_default_verifier, majority_vote

    tb = build_testbed()
    model, tok = tb.load_model()
    rows = read_records(tb.split("train"))[: args.questions]
    questions = [r["extra_info"]["question"] for r in rows]
    gold = [r["reward_model"]["ground_truth"] for r in rows]
    n_max = max(args.votes)
    completions = sample(model, tok, questions, n=n_max, temperature=1.0, seed=args.seed)
    answers = [[extract_answer(c.text, truncated=c.truncated) for c in per_q] for per_q in completions]
    v = get_default_verifier()
    total = len(questions) * n_max
    pass1 = sum(a is not None and v.equivalent(a, g) for q, g in zip(answers, gold) for a in q) / total
    no_answer = sum(a is None for q in answers for a in q) / total
    print(f"testbed base model ({tb.root.name}), {len(questions)} training questions, T=1; "
          f"of all {total} responses: pass@1 {pass1:.3f}, no answer {no_answer:.3f}")
    print(f"{'N':>3s} {'rule':10s} {'target share':>12s} {'empty target':>12s} {'accuracy':>9s} "
          f"{'differs from devenus':>21s}")
    rows = []
    for n in args.votes:
        ours = [majority_vote(q[:n]).target for q in answers]
        for name, rule in (("devenus", None), ("ttrl-ref", ttrl_ref), ("corew-ref", corew_ref)):
            t = ours if rule is None else [rule(q[:n]) for q in answers]
            has = [x is not None and x != "" for x in t]
            empty = sum(x == "" for x in t) / len(t)
            correct = [v.equivalent(x, g) for x, g, h in zip(t, gold, has) if h]
            acc = sum(correct) / len(correct) if correct else float("nan")
            differs = sum((a or "") != (b or "") and not (a and b and v.equivalent(a, b))
                          for a, b in zip(t, ours)) / len(t)
            print(f"{n:3d} {name:10s} {sum(has) / len(t):12.3f} {empty:12.3f} {acc:9.3f} {differs:21.3f}")
            rows.append({"votes": n, "rule": name, "target_share": sum(has) / len(t), "empty_target": empty,
                         "accuracy": acc, "differs_from_devenus": differs})
    if not args.no_save:
        from _results import write_result

        print(write_result("reference_votes", {
            "args": vars(args), "testbed": tb.root.name, "pass_at_1": pass1, "no_answer": no_answer, "rows": rows}))


if __name__ == "__main__":
    main()
