"""Ray Data generation (``--actors N`` CPU actors) against the single-process generator on the same pool,
measured in one run, printed as a ratio; and whether the two wrote byte-identical shards.

    python bench/select_ray_data.py [--questions 64] [--samples 8] [--actors 2] [--out outputs/select_ray_bench]

Both generate the first N testbed-pool questions x G samples with the same seeds into separate folders
(each starts empty). The Ray side includes what a user pays: starting a local Ray and each actor loading
the model; the single-process side loads the model once. On a 2-core machine two actors can at best halve
the time; the ratio says how close they come.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=8, help="questions per shard (the unit an actor takes)")
    ap.add_argument("--out", default="outputs/select_ray_bench")
    a = ap.parse_args()

    import torch

    from devenus.select.config import load_config
    from devenus.select.stages import run_generate
    from devenus.testbed.pool import build_pool

    torch.set_num_threads(1)
    build_pool()
    out = Path(a.out)
    over = {"limit": a.questions, "shard_size": a.shard_size, "generate.samples": a.samples}
    times = {}
    for name, actors in (("single process", 0), (f"Ray Data, {a.actors} actors", a.actors)):
        folder = out / ("ray" if actors else "single")
        shutil.rmtree(folder, ignore_errors=True)  # a fresh run each time: nothing resumed
        cfg = load_config(None, {**over, "out": str(folder)})
        t0 = time.perf_counter()
        run_generate(cfg, progress=False, actors=actors)
        times[name] = time.perf_counter() - t0
    single, ray = (out / "single"), (out / "ray")
    files = sorted(p.relative_to(single) for p in single.rglob("*.parquet"))
    same = bool(files) and all((ray / f).exists() and (ray / f).read_bytes() == (single / f).read_bytes() for f in files)

    base = times["single process"]
    print(f"generate: {a.questions} pool questions x {a.samples} samples, shards of {a.shard_size}, "
          f"torch threads 1 per process")
    print(f"{'generator':<24} {'wall s':>8} {'questions/s':>12} {'vs single':>10}")
    for name, t in times.items():
        print(f"{name:<24} {t:8.1f} {a.questions / t:12.2f} {t / base:9.2f}x")
    print(f"byte-identical shards: {same} ({len(files)} files)")
    if not same:
        raise SystemExit("the Ray Data run wrote different shards")


if __name__ == "__main__":
    main()
