"""Throughput of the verify pipeline (extract -> majority vote -> re-score against the target)
versus a naive math-verify pipeline, on synthetic grouped responses.

    python bench/verify_throughput.py [--quick] [--seed N]

Synthetic data: worked-solution-like responses ending in ``\\boxed{...}``, in groups of 8 and 64.
Each group has a majority value and 1-3 distractor values; every value appears in several
equivalent written forms (``0.5`` / ``\\frac{1}{2}`` / ``1/2``, ``2\\sqrt{2}`` / ``\\sqrt{8}``,
``x = 3`` / ``3``, ``(x+1)^2`` / ``x^2+2x+1``); ~5% of responses have no answer and ~2% are
truncated.

Baseline ("naive math-verify"): ``math_verify.parse`` on every full response, then greedy
clustering where every response is ``verify``-ed against every cluster representative, with
math-verify's own (signal-based) timeouts, in this process. It is much slower, so it runs on a
subset of groups and its rate is extrapolated per answer (printed as such). Labels (majority
exists, per-response agreement with the majority) are compared between both pipelines on that
subset.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from dataclasses import dataclass
from fractions import Fraction

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from devenus.verify import Verifier, extract_answer, majority_vote  # noqa: E402

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


# ---------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)

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
    for g, n_o, t_o, n_b, t_b in rows:
        r_o, r_b = n_o / t_o, n_b / t_b
        print(f"{g:>3} | {n_o:>13,} | {t_o:>8.2f} | {r_o:>11,.0f} | {n_b:>15,} | {t_b:>8.2f} | {r_b:>12,.1f} | {r_o / r_b:>6.0f}x")
    n_all_o = sum(r[1] for r in rows)
    t_all_o = sum(r[2] for r in rows)
    n_all_b = sum(r[3] for r in rows)
    t_all_b = sum(r[4] for r in rows)
    print(f"all | {n_all_o:>13,} | {t_all_o:>8.2f} | {n_all_o / t_all_o:>11,.0f} | {n_all_b:>15,} | {t_all_b:>8.2f} | {n_all_b / t_all_b:>12,.1f} | {(n_all_o / t_all_o) / (n_all_b / t_all_b):>6.0f}x")
    print()
    print(
        f"* naive math-verify measured on a subset ({n_all_b:,} answers, the first groups of each size); "
        f"its rate is extrapolated per answer: ~{n_all_o / (n_all_b / t_all_b) / 60:.1f} min for all {n_all_o:,} answers."
    )
    print(
        f"label mismatches (majority exists / per-response agreement) on the {compared_groups} compared groups: "
        f"{mismatch_groups} groups, {mismatch_responses} responses"
    )
    print(f"verifier stats: {verifier.stats.as_dict()}")
    verifier.close()


if __name__ == "__main__":
    main()
