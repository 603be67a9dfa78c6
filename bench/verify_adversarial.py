"""Adversarial answers against the verify stack: no hang beyond the bound, no crash.

    python bench/verify_adversarial.py [--quick] [--timeout 2.0]

Each case is (1) embedded in a response as ``... \\boxed{CASE}`` and run through extraction, and
(2) handed directly to ``Verifier.equivalent`` against a few targets (as if it had been extracted).
The worker is started before each check, so a check's time excludes the worker (re)start, which
is reported separately. The script exits non-zero if a check overran ``timeout + slack`` or raised.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from devenus.verify import Verifier, extract_answer  # noqa: E402

SLACK_S = 1.0  # kill + reap + scheduling noise on a loaded box


def cases() -> list[tuple[str, str]]:
    tower7 = "2^{2^{2^{2^{2^{2^{2}}}}}}"
    return [
        ("deep braces x3000", "{" * 3000 + "1" + "}" * 3000),
        ("deep \\frac x400", "\\frac{" * 400 + "1" + "}{2}" * 400),
        ("deep \\sqrt x500", "\\sqrt{" * 500 + "2" + "}" * 500),
        ("megabyte digits", "1" * 1_000_000),
        ("megabyte sum", "1+" * 500_000 + "1"),
        ("long sum 8k chars", "1+" * 4000 + "1"),
        ("tower 2^2^..(7)", tower7),
        ("tower 2^{..} x50", "2^{" * 50 + "2" + "}" * 50),
        ("10^{10^{10}}", "10^{10^{10}}"),
        ("9^{9^{9}}", "9^{9^{9}}"),
        ("(10^{10^{5}})!", "(10^{10^{5}})!"),
        ("100000!", "100000!"),
        ("10^{10^{10}}-10^{10^{10}}", "10^{10^{10}} - 10^{10^{10}}"),
        ("(x+1)^{1000}", "(x+1)^{1000}"),
        ("x^{x^{x^{x^{x}}}}", "x^{x^{x^{x^{x}}}}"),
        ("binom huge", "\\binom{10^{6}}{5 \\cdot 10^{5}}"),
        ("sum n^n to 1e9", "\\sum_{n=1}^{10^{9}} n^{n}"),
        ("prod to 1e6", "\\prod_{k=1}^{10^{6}} k"),
        ("int gaussian", "\\int_0^1 e^{-x^2}\\,dx"),
        ("int x^x", "\\int x^{x}\\, dx"),
        ("int sinc", "\\int_{0}^{\\infty} \\frac{\\sin x}{x}\\, dx"),
        ("limit", "\\lim_{x \\to 0} \\frac{\\sin x}{x}"),
        ("matrix 30x30", "\\begin{pmatrix}" + "\\\\".join("&".join("x" for _ in range(30)) for _ in range(30)) + "\\end{pmatrix}"),
        ("unbalanced \\frac{1}{2", "\\frac{1}{2"),
        ("unbalanced {{{1}", "{{{1}"),
        ("unbalanced }}}{{{", "}}}{{{"),
        ("unbalanced \\sqrt{", "\\sqrt{"),
        ("\\left( \\right.", "\\left( 1 \\right."),
        ("full-width 1/2", "１／２"),
        ("U+2212 minus", "\u22121"),
        ("vulgar half", "\u00bd"),
        ("arabic-indic 1", "\u0661"),
        ("math bold 1", "\U0001d7cf"),
        ("superscript x^2", "x\u00b2"),
        ("zero-width space", "1\u200b"),
        ("backslash flood", "\\\\" * 2000),
        ("\\text{ flood", "\\text{" * 1000),
        ("dollar flood", "$" * 5000),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one target per case")
    ap.add_argument("--timeout", type=float, default=2.0, help="Verifier timeout_s")
    args = ap.parse_args()
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    targets = ["1"] if args.quick else ["1", "\\frac{1}{2}", "x+1"]
    v = Verifier(timeout_s=args.timeout)
    bound = args.timeout + SLACK_S

    worst_check = 0.0
    worst_extract = 0.0
    restarts: list[float] = []
    overruns = 0
    crashes = 0
    print(f"{'case':28} | {'chars':>9} | {'extract s':>9} | {'worst check s':>13} | {'timeouts':>8} | {'errors':>6} | results")
    print("-" * 100)
    for name, case in cases():
        t = time.perf_counter()
        try:
            extract_answer("We compute carefully. Thus the answer is $\\boxed{" + case + "}$.")
        except Exception as e:  # noqa: BLE001 - a crash is what we are counting
            crashes += 1
            print(f"  extraction crashed: {type(e).__name__}: {e}")
        dt_extract = time.perf_counter() - t
        worst_extract = max(worst_extract, dt_extract)

        s0 = v.stats
        worst = 0.0
        results = []
        for target in targets:
            t = time.perf_counter()
            v.start()  # (re)start outside the timed check
            restarts.append(time.perf_counter() - t)
            t = time.perf_counter()
            try:
                results.append("T" if v.equivalent(case, target) else "F")
            except Exception as e:  # noqa: BLE001
                crashes += 1
                results.append("CRASH")
                print(f"  check crashed: {type(e).__name__}: {e}")
            dt = time.perf_counter() - t
            worst = max(worst, dt)
            if dt > bound:
                overruns += 1
        worst_check = max(worst_check, worst)
        s1 = v.stats
        print(
            f"{name:28} | {len(case):>9,} | {dt_extract:>9.3f} | {worst:>13.3f} | "
            f"{s1.timeouts - s0.timeouts:>8} | {s1.errors - s0.errors:>6} | {''.join(results)}"
        )
    v.close()
    st = v.stats
    n_checks = len(cases()) * len(targets)
    slow_restarts = [r for r in restarts if r > 0.05]
    print()
    print(f"checks: {n_checks} (timeout {args.timeout:.1f} s, allowed {bound:.1f} s incl. kill)")
    print(f"worst-case time per check: {worst_check:.3f} s;  worst extraction: {worst_extract:.3f} s")
    print(f"timeouts: {st.timeouts}, worker errors: {st.errors}, worker restarts: {st.worker_restarts}, oversize: {st.oversize}")
    if slow_restarts:
        print(f"worker (re)start time: mean {sum(slow_restarts) / len(slow_restarts):.2f} s, max {max(slow_restarts):.2f} s (not part of a check)")
    print(f"hangs beyond the bound: {overruns}, crashes: {crashes}")
    print(f"verifier stats: {st.as_dict()}")
    ok = overruns == 0 and crashes == 0
    print("RESULT:", "OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
