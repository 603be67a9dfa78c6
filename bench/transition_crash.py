"""``devenus transition`` killed (SIGKILL, whole process group) at 100 random points: D(k) intact every time,
a rerun byte-identical to an uninterrupted run, a complete manifest; and its time against a baseline.

    python bench/transition_crash.py [--rows 1500] [--points 100] [--seed 13]

Kill points are uniform over [0, T], T = the wall time of one uninterrupted CLI run (interpreter start and
imports included, as a crash would see them). After each kill: the parent's sha256 is compared, what the
kill left is classified (no output / a consistent old version / a version whose manifest does not match
its Parquet: a kill between the two renames, which `verify_manifest` reports), then the transition reruns
in-process with --force and both files are compared byte for byte with the reference run.

Time: the in-process transition against the baseline of writing the same rows unchanged through
`write_version` (the dataset-version writer alone), same process, same run; printed as a ratio.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "transitions"))
from fixtures import cli, kill_at, make_dataset, make_evidence  # noqa: E402

from devenus.records.io import read_records  # noqa: E402
from devenus.records.versions import VersionError, manifest_path, sha256_file, verify_manifest, write_version  # noqa: E402
from devenus.transitions import build_transition  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        data = make_dataset(d / "d0.parquet", n=args.rows)
        ev = make_evidence(d / "evidence", data, n=args.rows)
        ref = d / "ref" / "d1.parquet"

        t0 = time.perf_counter()
        write_version(read_records(data), d / "base" / "copy.parquet", rule="copy", parent=[data])
        base_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = build_transition(data, ev, ref, "promote")
        trans_s = time.perf_counter() - t0
        print(f"rows {args.rows}: transition {trans_s:.3f}s ({r.accepted} promoted, {r.rejected} rejected), "
              f"baseline write_version of the same rows {base_s:.3f}s, ratio {trans_s / base_s:.2f}x")

        parent = sha256_file(data)
        out = d / "d1.parquet"
        cmd = cli(str(data), "--evidence", str(ev), "--rule", "promote", "--out", str(out), "--force")
        t0 = time.perf_counter()
        assert kill_at(cmd, 600) == 0
        full = time.perf_counter() - t0
        print(f"uninterrupted CLI run: {full:.2f}s wall; killing at {args.points} points uniform in [0, {full:.2f}]s")
        rng = random.Random(args.seed)
        left = {"finished": 0, "no output": 0, "parquet without manifest": 0, "consistent version": 0,
                "manifest mismatch": 0}
        intact = identical = 0
        for _ in range(args.points):
            if kill_at(cmd, rng.uniform(0.0, full)) == 0:
                left["finished"] += 1
            elif not out.exists():
                left["no output"] += 1
            elif not manifest_path(out).exists():
                left["parquet without manifest"] += 1  # killed between the two renames
            else:
                try:
                    verify_manifest(out, [data])
                    left["consistent version"] += 1
                except VersionError:
                    left["manifest mismatch"] += 1
            intact += sha256_file(data) == parent
            build_transition(data, ev, out, "promote", force=True)
            verify_manifest(out, [data])
            identical += (out.read_bytes() == ref.read_bytes()
                          and manifest_path(out).read_bytes() == manifest_path(ref).read_bytes())
            out.unlink()
            manifest_path(out).unlink()
        print(f"after the kill: {left}")
        print(f"parent intact {intact}/{args.points}; rerun byte-identical with a verified manifest {identical}/{args.points}")


if __name__ == "__main__":
    main()
