"""Materializing a routed pool: rows per second of ``run_materialize`` (read and validate the pool,
annotate, build every change, write the version through records.versions), against the plain read
of the same pool measured in the same run.

    python bench/select_materialize.py [--questions 100000]

The pool is synthetic (unlabeled addition questions with simulation answers); decisions are drawn at
the paper's ratios (annotate 29.3%, discard 42.1%, weak 28.6%) and written as a finished route stage.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=100_000)
    a = ap.parse_args()

    import pyarrow as pa

    from devenus.records import make_row, read_records, write_records
    from devenus.select.config import load_config
    from devenus.select.stages import SelectionRun, run_materialize
    from devenus.select.shards import write_table

    n = a.questions
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = [make_row(data_source="synthetic/add", index=f"pool/{i:07d}", source="synthetic", split="pool",
                         question=f"Compute {i} + {2 * i}.", labeled=False,
                         simulation={"hidden_answer": str(3 * i), "noise": "none"}, validate=False)
                for i in range(n)]
        pool = write_records(rows, tmp / "pool.parquet")
        del rows
        cfg = load_config(None, {"pool": str(pool), "out": str(tmp / "run")})
        st = SelectionRun(cfg).stage("route").open()
        dec = np.random.default_rng(0).choice(["annotate", "discard", "weak"], size=n, p=[0.293, 0.421, 0.286])
        write_table(pa.table({"index": [f"pool/{i:07d}" for i in range(n)], "decision": dec.tolist(),
                              "u": np.zeros(n), "rank": np.arange(n), "label": pa.nulls(n, pa.string())}),
                    st.shard_path(0))
        st.finish({"counts": {d: int((dec == d).sum()) for d in ("annotate", "discard", "weak")}, "selector": "ratio",
                   "signal": "consistency"})
        t0 = time.perf_counter()
        read_records(pool)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        m = run_materialize(cfg, progress=False)
        t_mat = time.perf_counter() - t0
    print(f"{n} questions: materialize {t_mat:.1f} s ({n / t_mat:,.0f} rows/s; {m.output['rows']} rows out, "
          f"{m.counts['changes']} changes); validated read of the pool alone {t_read:.1f} s "
          f"(materialize / read: {t_mat / t_read:.1f}x)")
    print(f"scaled to 1M questions: about {t_mat * 1_000_000 / n:.0f} s")


if __name__ == "__main__":
    main()
