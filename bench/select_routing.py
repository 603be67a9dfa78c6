"""Routing 1M questions x 8 samples from precomputed per-sample scores: vectorised, against a Python
loop per question measured in the same run (on a slice, scaled per question).

    python bench/select_routing.py [--questions 1000000] [--samples 8] [--loop-slice 20000]

Steps timed: aggregate the per-sample uncertainties per question (mean, and the majority-only rule),
the seeded key tie-breaker, the ratio router (annotate top 29.3%, discard bottom 42.1%) and the
interval router (dapo, budget 100k), and writing the decision table (Parquet, like the route stage).
The loop baseline does the same per question with :func:`devenus.select.score.aggregate` and a sort.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--loop-slice", type=int, default=20_000)
    a = ap.parse_args()

    import pyarrow as pa

    from devenus.select.route import DECISIONS, interval_route, ratio_route, tiebreak
    from devenus.select.score import aggregate, aggregate_matrix
    from devenus.select.shards import write_table

    n, g = a.questions, a.samples
    rng = np.random.default_rng(0)
    per_sample = rng.gamma(2.0, 0.2, size=(n, g))
    agrees = rng.random((n, g)) < 0.6
    passed = rng.random((n, g)) < rng.random((n, 1))
    keys = [f"pool/{i:07d}" for i in range(n)]

    times = {}
    t0 = time.perf_counter()
    u = aggregate_matrix(per_sample, "mean")
    u_maj = aggregate_matrix(per_sample, "majority", agrees)
    p = passed.mean(axis=1)
    times["aggregate (mean + majority-only)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ties = tiebreak(keys, 0)
    times["tie-breaker (sha1 per key)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dec = ratio_route(u, ties, 0.293, 0.421)
    times["ratio route"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    interval_route(p, u_maj, ties, (0.0, 1.0, False, False), budget=100_000)
    times["interval route (dapo, budget)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        names = np.array(DECISIONS, dtype=object)[dec]
        write_table(pa.table({"index": pa.array(keys, pa.string()), "decision": pa.array(names, pa.string()),
                              "u": pa.array(u, pa.float64())}), Path(tmp) / "route.parquet")
    times["write decisions (Parquet)"] = time.perf_counter() - t0
    total = sum(times.values())

    m = min(a.loop_slice, n)
    t0 = time.perf_counter()
    lu = [aggregate(per_sample[i], "mean") for i in range(m)]
    [aggregate(per_sample[i], "majority", agrees[i]) for i in range(m)]
    order = sorted(range(m), key=lambda i: (-lu[i], keys[i]))
    loop_dec = {}
    na, nd = round(0.293 * m), round(0.421 * m)
    for r, i in enumerate(order):
        loop_dec[keys[i]] = "annotate" if r < na else ("discard" if r >= m - nd else "weak")
    loop_s = (time.perf_counter() - t0) * n / m

    print(f"{n} questions x {g} samples, vectorised:")
    for k, v in times.items():
        print(f"  {k:<36} {v:7.2f} s")
    print(f"  {'total':<36} {total:7.2f} s  (limit 60 s: {'ok' if total <= 60 else 'OVER'})")
    print(f"loop per question (aggregate + sort), {m} questions scaled to {n}: {loop_s:7.2f} s")
    print(f"vectorised / loop: {total / loop_s:.3f}x  (loop / vectorised: {loop_s / total:.1f}x)")
    counts = {d: int((dec == c).sum()) for c, d in enumerate(DECISIONS)}
    print(f"decisions: {counts}")


if __name__ == "__main__":
    main()
