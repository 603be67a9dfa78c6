"""Import and hide-labels on growing JSONL inputs: rows/s and peak memory, against pyarrow alone.

    python bench/import_scaling.py [--rows 10000 40000 120000] [--keep DIR] [--baseline REV]

For each size a synthetic GSM8K-like JSONL file is written (about 1.1 kB per row, like the 200 MB /
186k-row file of issue 9), then each step runs in a fresh Python process so that its peak resident
memory (``ru_maxrss``) is its own:

  pyarrow read     ``pyarrow.json.read_json`` of the file: the baseline (reading only, in C++)
  import (REV)     with ``--baseline REV``: the same import by the importer of git revision REV
                   (its ``src/`` exported to a temporary folder), measured in the same run
  import (stream)  ``devenus import`` as the CLI runs it (``records.import_file``: one streaming
                   pass over pyarrow-read blocks, Parquet + manifest)
  import (memory)  ``import_raw`` + ``write_records``: every row held in memory (the path before
                   streaming; kept as the reference the streaming path must beat on memory)
  hide-labels      ``devenus data hide-labels --labeled-fraction 0.1`` on the import's output

Printed per size and step: seconds, rows/s, peak RSS in MB, and both as ratios to the pyarrow read of
the same file in the same run (rows/s ratio < 1: slower than pyarrow; memory ratio: times pyarrow's
peak). Peak RSS includes the interpreter and the same imports in every step (pyarrow, pandas, tqdm;
about 150 MB); one-time import time is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# each step: (imports, timed body); the imports are not timed, their memory is in the peak
STEPS = {
    "pyarrow read": ("import pyarrow.json as pj", """
t = pj.read_json({src!r})
assert t.num_rows == {n}
"""),
    "import (stream)": ("from devenus.records import import_file", """
s, m = import_file({src!r}, {out!r}, source="bench", progress=False, force=True)
assert s.rows == {n}
"""),
    "import (memory)": ("from devenus.records import import_raw, write_records", """
rows = import_raw({src!r}, source="bench")
write_records(rows, {out!r})
assert len(rows) == {n}
"""),
    "hide-labels": ("from devenus.records.labels import hide_labels_file", """
m = hide_labels_file({out_stream!r}, {hidden!r}, 0.1, seed=0, force=True, progress=False)
assert m.output["rows"] == {n}
"""),
}

_MEASURE = """
import resource, time
{setup}
import devenus.verify.extract, tqdm, pandas, pyarrow.parquet  # noqa: F401 - one-time imports (pyarrow's Parquet writer loads pandas): not timed
t0 = time.perf_counter()
{body}
dt = time.perf_counter() - t0
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_input(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    words = "apples oranges train station minutes dollars each total share price week garden".split()
    with open(path, "w") as f:
        for i in range(n):
            a, b = rng.randint(2, 999), rng.randint(2, 999)
            filler = " ".join(rng.choice(words) for _ in range(45))
            question = f"Problem {i}: {filler}. If Tom has {a} and buys {b} more, how many does he have?"
            steps = " ".join(rng.choice(words) for _ in range(110))
            answer = f"{steps}\nHe has {a} + {b} = <<{a}+{b}={a + b}>>{a + b}.\n#### {a + b}"
            f.write(json.dumps({"question": question, "answer": answer}) + "\n")


def measure(step: str, src_dir: str | None = None, **kw) -> tuple[float, float]:
    setup, body = STEPS[step]
    code = _MEASURE.format(setup=setup, body=body.format(**kw))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if src_dir is not None:  # another revision's package first on the path
        env["PYTHONPATH"] = os.pathsep.join([src_dir, *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{step} failed:\n{proc.stderr[-3000:]}")
    dt, rss_kb = proc.stdout.split()[-2:]
    return float(dt), int(rss_kb) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10000, 40000, 120000], help="input sizes in rows")
    ap.add_argument("--keep", default=None, help="folder for the generated files (default: a temporary one)")
    ap.add_argument("--baseline", default=None, help="also time the import of this git revision (e.g. the one before a change)")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="devenus-import-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    base_src = None
    if args.baseline:
        repo = Path(__file__).resolve().parent.parent
        old = Path(tempfile.mkdtemp(prefix="devenus-import-baseline-"))
        archive = subprocess.run(["git", "-C", str(repo), "archive", args.baseline, "src"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        base_src = str(old / "src")
    print(f"{'rows':>7} {'input MB':>8}  {'step':<16} {'s':>7} {'rows/s':>8} {'x pyarrow':>9} {'peak MB':>8} {'x pyarrow':>9}")
    for n in args.rows:
        src = work / f"in_{n}.jsonl"
        write_input(src, n)
        mb = src.stat().st_size / 2**20
        kw = dict(src=str(src), n=n, out=str(work / f"mem_{n}.parquet"), out_stream=str(work / f"d0_{n}.parquet"),
                  hidden=str(work / f"semi_{n}.parquet"))
        base_dt, base_rss = measure("pyarrow read", **kw)
        steps = list(STEPS)
        if base_src:
            steps.insert(1, f"import ({args.baseline[:10]})")
        for step in steps:
            if step == "pyarrow read":
                dt, rss = base_dt, base_rss
            elif step.startswith("import (") and step not in STEPS:  # the baseline revision's import
                dt, rss = measure("import (stream)", src_dir=base_src, **dict(kw, out=str(work / f"old_{n}.parquet")))
            elif step == "import (stream)":
                dt, rss = measure(step, **dict(kw, out=kw["out_stream"]))
            else:
                dt, rss = measure(step, **kw)
            print(f"{n:>7} {mb:>8.1f}  {step:<16} {dt:>7.2f} {n / dt:>8.0f} {base_dt / dt:>9.3f} {rss:>8.0f} {rss / base_rss:>9.2f}",
                  flush=True)
    if not args.keep:
        shutil.rmtree(work)
    if base_src:
        shutil.rmtree(Path(base_src).parent)


if __name__ == "__main__":
    main()
