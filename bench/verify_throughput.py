"""Throughput of the verify stack against math-verify in the same run, on two mixes.

    python bench/verify_throughput.py [--mix testbed|latex] [--quick] [--repeats N] [--out FILE]

Writes the table as JSON (commit, machine, date, load) to bench/results/verify_throughput_<mix>.json.
Thread pools are pinned to one thread (OMP/MKL/OpenBLAS; torch too if something loaded it).

``--mix testbed`` (default): the grouped pipeline (extract -> majority vote -> re-score against the
target) versus a naive math-verify pipeline, on synthetic grouped responses: worked-solution-like
responses ending in ``\\boxed{...}``, in groups of 8 and 64. Each group has a majority value and 1-3
distractor values; every value appears in several equivalent written forms (``0.5`` /
``\\frac{1}{2}`` / ``1/2``, ``2\\sqrt{2}`` / ``\\sqrt{8}``, ``x = 3`` / ``3``, ``(x+1)^2`` /
``x^2+2x+1``); ~5% of responses have no answer and ~2% are truncated. Baseline ("naive
math-verify"): ``math_verify.parse`` on every full response, then greedy clustering where every
response is ``verify``-ed against every cluster representative, with math-verify's own
(signal-based) timeouts, in this process. It is much slower, so it runs on a subset of groups and
its rate is extrapolated per answer (printed as such). Labels (majority exists, per-response
agreement with the majority) are compared between both pipelines on that subset. These are short
answers repeated within a group: they say little about LaTeX answers.

``--mix latex``: one (response, gold) pair at a time from the corpus of
``bench/verify_latex_corpus.py`` (720 pairs in eight classes of LaTeX answer forms, half of them
near misses, with a careful human grader's label). Two paths, each against per-pair math-verify
(``parse`` of both sides + ``verify``, its default configuration): ``reward`` grades the response as
``compute_score`` does (``grade``: extract, then ``Verifier.equivalent``), ``equivalent`` compares the
bare answer. Per class: pairs/s of both sides (median of the repeats), their ratio (median of the
per-repeat ratios: both sides run back to back on the same class in every repeat, in alternating
order, so a loaded machine slows both alike), agreement of each side with the human label, false
positives / negatives, and the pairs where the two sides disagree (listed in the JSON).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
for _var in THREAD_VARS:  # before numpy/sympy load; the verify workers inherit it
    os.environ[_var] = "1"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from devenus.atomic import write_text_atomic  # noqa: E402
from devenus.verify import Verifier, extract_answer, grade, majority_vote  # noqa: E402

# ---------------------------------------------------------------------------- synthetic data


def _int_forms(v: int, rng: random.Random) -> list[str]:
    forms = [str(v), str(v), f"x = {v}", f"{v}.0"]
    if v >= 1000:
        forms.append(f"{v:,}")
    return forms


def _frac_forms(p: int, q: int) -> list[str]:
    forms = [f"\\frac{{{p}}}{{{q}}}", f"\\dfrac{{{p}}}{{{q}}}", f"{p}/{q}"]
    dec = Fraction(p, q)
    if 10**6 % q == 0:
        forms.append(str(float(dec)))
    return forms


def _surd_forms(a: int, b: int) -> list[str]:
    return [f"{a}\\sqrt{{{b}}}", f"\\sqrt{{{a * a * b}}}", f"{a} \\cdot \\sqrt{{{b}}}"]


def _poly_forms(c: int) -> list[str]:
    return [f"(x+{c})^2", f"x^2+{2 * c}x+{c * c}", f"x^{{2}} + {2 * c} x + {c * c}"]


def _value(kind: str, rng: random.Random) -> list[str]:
    """All written forms of one random value of the given kind."""
    if kind == "int":
        return _int_forms(rng.choice([rng.randint(0, 200), rng.randint(200, 5000)]), rng)
    if kind == "frac":
        q = rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 20, 25])
        p = rng.randint(1, 3 * q)
        f = Fraction(p, q)
        if f.denominator == 1:
            f += Fraction(1, q if q > 1 else 2)
        return _frac_forms(f.numerator, f.denominator)
    if kind == "surd":
        return _surd_forms(rng.randint(2, 9), rng.choice([2, 3, 5, 6, 7]))
    return _poly_forms(rng.randint(1, 9))


KINDS = (("int", 0.6), ("frac", 0.2), ("surd", 0.15), ("poly", 0.05))


def _response(form: str | None, rng: random.Random) -> str:
    steps = []
    for k in range(rng.randint(5, 12)):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        steps.append(
            f"Step {k + 1}: we know that ${a} \\times {b} = {a * b}$, so the quantity "
            f"$\\frac{{{a * b}}}{{{b}}}$ simplifies to ${a}$ and we continue with it."
        )
    body = "\n".join(steps)
    if form is None:
        return body + "\nHmm, this does not look right. Let me reconsider the setup once more"
    return body + f"\nTherefore, the final answer is $\\boxed{{{form}}}$."


@dataclass
class Group:
    responses: list[str]
    truncated: list[bool]


def make_group(g: int, rng: random.Random) -> Group:
    kind = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
    values = []
    while len(values) < rng.randint(2, 4):
        forms = _value(kind, rng)
        if all(forms[0] != v[0] for v in values):
            values.append(forms)
    share = rng.uniform(0.3, 0.8)
    responses, truncated = [], []
    for _ in range(g):
        u = rng.random()
        if u < 0.05:
            form = None
        elif rng.random() < share:
            form = rng.choice(values[0])
        else:
            form = rng.choice(rng.choice(values[1:]))
        responses.append(_response(form, rng))
        truncated.append(form is not None and rng.random() < 0.02)
    return Group(responses, truncated)


# ---------------------------------------------------------------------------- pipelines


@dataclass
class Labels:
    has_majority: bool
    agrees: tuple[bool, ...]


def ours(group: Group, verifier: Verifier) -> Labels:
    preds = [extract_answer(r, truncated=t) for r, t in zip(group.responses, group.truncated)]
    vote = majority_vote(preds, verifier)
    if vote.target is None:
        return Labels(False, (False,) * len(preds))
    # TTRL-style re-score against the pseudo target (mostly exact/cache hits).
    rewards = tuple(p is not None and verifier.equivalent(p, vote.target) for p in preds)
    return Labels(True, rewards)


def make_baseline():
    from math_verify import LatexExtractionConfig, parse, verify

    cfg = [LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)]

    def baseline(group: Group) -> Labels:
        parsed = [None if t else (parse(r, extraction_config=cfg) or None) for r, t in zip(group.responses, group.truncated)]
        reps: list = []
        sizes: list[int] = []
        member: list[int | None] = []
        for p in parsed:
            if p is None:
                member.append(None)
                continue
            for k, rep in enumerate(reps):
                if verify(rep, p):
                    member.append(k)
                    sizes[k] += 1
                    break
            else:
                member.append(len(reps))
                reps.append(p)
                sizes.append(1)
        if not sizes or sizes.count(max(sizes)) > 1:
            return Labels(False, (False,) * len(parsed))
        win = sizes.index(max(sizes))
        # score every response against the target, as a reward function would
        return Labels(True, tuple(p is not None and verify(reps[win], p) for p in parsed))

    return baseline


# ---------------------------------------------------------------------------- the testbed mix


def run_testbed(args: argparse.Namespace) -> dict:
    total = 4_000 if args.quick else 100_000
    base_answers = {8: 160, 64: 256} if args.quick else {8: 1_600, 64: 1_280}
    rng = random.Random(args.seed)

    verifier = Verifier()
    t0 = time.perf_counter()
    assert verifier.start(), "verify worker failed to start"
    startup = time.perf_counter() - t0
    baseline = make_baseline()

    rows = []
    mismatch_groups = 0
    mismatch_responses = 0
    compared_groups = 0
    for g in (8, 64):
        n_groups = (total // 2) // g
        t_ours = 0.0
        t_base = 0.0
        n_base = 0
        for i in range(n_groups):
            group = make_group(g, rng)
            t = time.perf_counter()
            lab = ours(group, verifier)
            t_ours += time.perf_counter() - t
            if n_base < base_answers[g]:
                t = time.perf_counter()
                blab = baseline(group)
                t_base += time.perf_counter() - t
                n_base += g
                compared_groups += 1
                if lab.has_majority != blab.has_majority or lab.agrees != blab.agrees:
                    mismatch_groups += 1
                    mismatch_responses += sum(a != b for a, b in zip(lab.agrees, blab.agrees))
        n_ours = n_groups * g
        rows.append((g, n_ours, t_ours, n_base, t_base))

    print(f"verify worker startup: {startup:.2f} s (excluded from the rates)")
    print()
    hdr = f"{'G':>3} | {'ours: answers':>13} | {'ours: s':>8} | {'ours: ans/s':>11} | {'naive: answers*':>15} | {'naive: s':>8} | {'naive: ans/s':>12} | {'speedup':>7}"
    print(hdr)
    print("-" * len(hdr))
    table = []
    for g, n_o, t_o, n_b, t_b in rows:
        r_o, r_b = n_o / t_o, n_b / t_b
        print(f"{g:>3} | {n_o:>13,} | {t_o:>8.2f} | {r_o:>11,.0f} | {n_b:>15,} | {t_b:>8.2f} | {r_b:>12,.1f} | {r_o / r_b:>6.0f}x")
        table.append({"group": g, "ours_answers": n_o, "ours_s": t_o, "naive_answers": n_b, "naive_s": t_b, "ratio": r_o / r_b})
    n_all_o = sum(r[1] for r in rows)
    t_all_o = sum(r[2] for r in rows)
    n_all_b = sum(r[3] for r in rows)
    t_all_b = sum(r[4] for r in rows)
    ratio = (n_all_o / t_all_o) / (n_all_b / t_all_b)
    print(f"all | {n_all_o:>13,} | {t_all_o:>8.2f} | {n_all_o / t_all_o:>11,.0f} | {n_all_b:>15,} | {t_all_b:>8.2f} | {n_all_b / t_all_b:>12,.1f} | {ratio:>6.0f}x")
    print()
    print(
        f"* naive math-verify measured on a subset ({n_all_b:,} answers, the first groups of each size); "
        f"its rate is extrapolated per answer: ~{n_all_o / (n_all_b / t_all_b) / 60:.1f} min for all {n_all_o:,} answers."
    )
    print(
        f"label mismatches (majority exists / per-response agreement) on the {compared_groups} compared groups: "
        f"{mismatch_groups} groups, {mismatch_responses} responses"
    )
    stats = verifier.stats.as_dict()
    print(f"verifier stats: {stats}")
    verifier.close()
    return {"worker_startup_s": startup, "groups": table, "ratio": ratio, "compared_groups": compared_groups,
            "mismatch_groups": mismatch_groups, "mismatch_responses": mismatch_responses, "verifier_stats": stats}


# ---------------------------------------------------------------------------- the LaTeX mix
# Two paths, each pair graded once per repeat by both sides, back to back per class (the order
# alternates between repeats), so the load of a shared machine hits both sides alike:
#   reward:     grade(response, gold) as compute_score does  vs  verify(parse(gold), parse(response))
#   equivalent: Verifier.equivalent(answer, gold)             vs  verify(parse(gold), parse(answer))
# A fresh Verifier per repeat and path (started outside the clock), so no pair is answered from
# a cache filled by an earlier repeat; math-verify's own caches hold 20 entries.


def make_mathverify() -> dict[str, Callable[[dict], bool]]:
    from math_verify import parse, verify

    def gold(row: dict) -> list:
        return parse("$" + row["gold"] + "$")

    return {
        "reward": lambda row: bool(verify(gold(row), parse(row["response"]))),
        "equivalent": lambda row: bool(verify(gold(row), parse("$" + row["answer"] + "$"))),
    }


def make_ours(verifier: Verifier) -> dict[str, Callable[[dict], bool]]:
    return {
        "reward": lambda row: grade(row["response"], row["gold"], verifier).score == 1.0,
        "equivalent": lambda row: verifier.equivalent(row["answer"], row["gold"]),
    }


PATHS = ("reward", "equivalent")


def quick_slice(rows: list[dict], per_class: int) -> list[dict]:
    """The first ``per_class`` rows of each class (the corpus alternates right and near miss)."""
    taken: dict[str, int] = {}
    out = []
    for r in rows:
        if taken.get(r["class"], 0) < per_class:
            taken[r["class"]] = taken.get(r["class"], 0) + 1
            out.append(r)
    return out


def _timed(fn: Callable[[dict], bool], rows: list[dict]) -> tuple[float, list[bool]]:
    labels = []
    t = time.perf_counter()
    for r in rows:
        labels.append(fn(r))
    return time.perf_counter() - t, labels


def measure(rows: list[dict], path: str, repeats: int, mv: dict[str, Callable[[dict], bool]]) -> dict:
    """Per class and repeat: seconds and labels of both sides on ``path``."""
    classes = sorted({r["class"] for r in rows}, key=[r["class"] for r in rows].index)
    by_class = {c: [r for r in rows if r["class"] == c] for c in classes}
    secs = {c: {"ours": [], "mathverify": []} for c in classes}
    labels: dict[str, dict[str, list[list[bool]]]] = {c: {"ours": [], "mathverify": []} for c in classes}
    stats: dict[str, int] = {}
    for rep in range(repeats):
        verifier = Verifier()
        assert verifier.start(), "verify worker failed to start"
        sides = {"ours": make_ours(verifier)[path], "mathverify": mv[path]}
        order = ("ours", "mathverify") if rep % 2 == 0 else ("mathverify", "ours")
        for c in classes:
            for side in order:
                dt, lab = _timed(sides[side], by_class[c])
                secs[c][side].append(dt)
                labels[c][side].append(lab)
        stats = verifier.stats.as_dict()  # the last repeat's: every repeat does the same work
        verifier.close()
    return {"classes": classes, "rows": by_class, "secs": secs, "labels": labels, "stats": stats}


def summarise(m: dict, path: str) -> dict:
    """The table of one path: rates are medians over repeats, the ratio is the median of the
    per-repeat ratios (both sides timed in the same repeat); labels are the first repeat's, and a
    pair whose label changed between repeats is counted as unstable."""
    table, mismatches = [], []
    tot_o = [0.0] * len(next(iter(m["secs"].values()))["ours"])
    tot_b = tot_o[:]
    agg = {"pairs": 0, "ours_agree": 0, "mathverify_agree": 0, "mismatches": 0, "ours_false_pos": 0, "ours_false_neg": 0,
           "mathverify_false_pos": 0, "mathverify_false_neg": 0, "unstable": 0}
    for c in m["classes"]:
        rows, s, lab = m["rows"][c], m["secs"][c], m["labels"][c]
        n = len(rows)
        tot_o = [a + b for a, b in zip(tot_o, s["ours"])]
        tot_b = [a + b for a, b in zip(tot_b, s["mathverify"])]
        ours_l, mv_l = lab["ours"][0], lab["mathverify"][0]
        human = [bool(r["label"]) for r in rows]
        unstable = sum(any(rep[i] != reps[0][i] for rep in reps[1:]) for reps in lab.values() for i in range(n))
        row = {
            "class": c, "pairs": n,
            "ours_pairs_per_s": statistics.median(n / t for t in s["ours"]),
            "mathverify_pairs_per_s": statistics.median(n / t for t in s["mathverify"]),
            "ratio": statistics.median(b / o for o, b in zip(s["ours"], s["mathverify"])),
            "ratio_range": [min(b / o for o, b in zip(s["ours"], s["mathverify"])), max(b / o for o, b in zip(s["ours"], s["mathverify"]))],
            "ours_agree": sum(o == h for o, h in zip(ours_l, human)),
            "mathverify_agree": sum(b == h for b, h in zip(mv_l, human)),
            "mismatches": sum(o != b for o, b in zip(ours_l, mv_l)),
            "ours_false_pos": sum(o and not h for o, h in zip(ours_l, human)),
            "ours_false_neg": sum(h and not o for o, h in zip(ours_l, human)),
            "mathverify_false_pos": sum(b and not h for b, h in zip(mv_l, human)),
            "mathverify_false_neg": sum(h and not b for b, h in zip(mv_l, human)),
            "unstable": unstable,
        }
        table.append(row)
        for k in agg:
            agg[k] += row[k]
        for r, o, b in zip(rows, ours_l, mv_l):
            if o != b:
                mismatches.append({"id": r["id"], "class": c, "form": r["form"], "style": r["style"], "early": r["early"],
                                   "gold": r["gold"], "answer": r["answer"], "human": r["label"], "ours": int(o), "mathverify": int(b)})
    n_all = agg["pairs"]
    total = {"class": "all", **agg,
             "ours_pairs_per_s": statistics.median(n_all / t for t in tot_o),
             "mathverify_pairs_per_s": statistics.median(n_all / t for t in tot_b),
             "ratio": statistics.median(b / o for o, b in zip(tot_o, tot_b)),
             "ratio_range": [min(b / o for o, b in zip(tot_o, tot_b)), max(b / o for o, b in zip(tot_o, tot_b))]}
    return {"path": path, "ratio": total["ratio"], "classes": table, "all": total, "mismatches": mismatches,
            "verifier_stats": m["stats"]}


def print_table(res: dict) -> None:
    print(f"\npath: {res['path']}  (pairs/s: median over repeats; ratio: median of same-repeat ratios, ours/math-verify)")
    hdr = (f"{'class':<9} | {'pairs':>5} | {'ours p/s':>9} | {'m-v p/s':>8} | {'ratio':>6} | {'ours=human':>10} | {'m-v=human':>9} "
           f"| {'ours≠m-v':>8} | {'ours FP/FN':>10} | {'m-v FP/FN':>9}")
    print(hdr)
    print("-" * len(hdr))
    for r in res["classes"] + [res["all"]]:
        n = r["pairs"]
        print(f"{r['class']:<9} | {n:>5} | {r['ours_pairs_per_s']:>9,.0f} | {r['mathverify_pairs_per_s']:>8,.0f} | {r['ratio']:>5.2f}x "
              f"| {r['ours_agree'] / n:>10.1%} | {r['mathverify_agree'] / n:>9.1%} | {r['mismatches']:>8} "
              f"| {r['ours_false_pos']:>4}/{r['ours_false_neg']:<5} | {r['mathverify_false_pos']:>4}/{r['mathverify_false_neg']:<4}")
    a = res["all"]
    if a["unstable"]:
        print(f"labels that changed between repeats: {a['unstable']} (load-dependent timeouts)")
    by_form: dict[tuple[str, str, int, int, int], int] = {}
    for mm in res["mismatches"]:
        k = (mm["class"], mm["form"], mm["human"], mm["ours"], mm["mathverify"])
        by_form[k] = by_form.get(k, 0) + 1
    if by_form:
        print("mismatches ours vs math-verify, by class and form (human/ours/m-v):")
        for (c, f, h, o, b), k in sorted(by_form.items()):
            print(f"  {c:<9} {f:<34} {h}/{o}/{b}  x{k}")
    print(f"verifier stats (one repeat): {res['verifier_stats']}")


def run_latex(args: argparse.Namespace) -> dict:
    import verify_latex_corpus as corpus

    rows = corpus.load(args.corpus)
    if args.quick:
        rows = quick_slice(rows, 4)
    repeats = args.repeats or (1 if args.quick else 5)
    mv = make_mathverify()
    warm = Verifier()
    for r in rows[:: max(1, len(rows) // 8)]:  # imports and first calls of both sides, outside the clock
        for side in (mv, make_ours(warm)):
            side["reward"](r)
    warm.close()
    out = {"corpus": {"path": os.path.relpath(args.corpus, ROOT), "pairs": len(rows),
                      "sha256": hashlib.sha256(Path(args.corpus).read_bytes()).hexdigest()},
           "repeats": repeats, "paths": {}}
    for path in PATHS:
        res = summarise(measure(rows, path, repeats, mv), path)
        print_table(res)
        out["paths"][path] = res
    out["ratio"] = out["paths"]["reward"]["ratio"]
    print(f"\nheadline: reward path {out['ratio']:.2f}x math-verify per pair on {len(rows)} pairs "
          f"(goal >= 3x); label mismatches {out['paths']['reward']['all']['mismatches']}")
    return out


# ---------------------------------------------------------------------------- main


def environment(note: str) -> dict:
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    import importlib.metadata as md

    from _results import machine

    return {
        "commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "src", "bench")),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {**machine(), "loadavg_start": list(os.getloadavg()), "note": note},
        "python": platform.python_version(), "math_verify": md.version("math-verify"),
        "threads": {k: os.environ.get(k) for k in THREAD_VARS} | {"torch": _torch_threads()},
    }


def _torch_threads() -> int | None:
    """torch's intra-op threads when torch is loaded (pinned to 1 then); nothing here imports it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    torch.set_num_threads(1)
    return torch.get_num_threads()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mix", choices=("testbed", "latex"), default="testbed")
    ap.add_argument("--quick", action="store_true", help="small smoke run (latex: 4 pairs per class, 1 repeat)")
    ap.add_argument("--seed", type=int, default=0, help="testbed mix: seed of the synthetic groups")
    ap.add_argument("--repeats", type=int, default=None, help="latex mix: repeats (default 5, 1 with --quick)")
    ap.add_argument("--corpus", default=str(ROOT / "bench" / "data" / "verify_latex.jsonl"), help="latex mix: the corpus")
    ap.add_argument("--out", default=None, help="JSON result (default bench/results/verify_throughput_<mix>.json; none with --quick)")
    ap.add_argument("--note", default="shared machine: other jobs ran during the bench (see loadavg)",
                    help="a line about the machine's state, kept in the JSON")
    args = ap.parse_args(argv)
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    result = {"bench": "verify_throughput", "mix": args.mix, "quick": args.quick, **environment(args.note)}
    result |= run_latex(args) if args.mix == "latex" else run_testbed(args)
    result["machine"]["loadavg_end"] = list(os.getloadavg())
    out = args.out or (None if args.quick else str(ROOT / "bench" / "results" / f"verify_throughput_{args.mix}.json"))
    if out:
        write_text_atomic(out, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
