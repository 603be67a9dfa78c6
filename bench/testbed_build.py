"""Testbed build time and the base model's held-out accuracy (with 95% CIs).

    python bench/testbed_build.py            # fresh build into a temporary cache (about 3-5 min)
    python bench/testbed_build.py --cached   # report the cached default build instead

Accuracy CIs treat questions as the unit (samples of one question are correlated).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cached", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch

    from devenus.tables import accuracy_table
    from devenus.testbed import TestbedConfig, build_testbed

    torch.set_num_threads(1)
    cfg = TestbedConfig(seed=args.seed)
    t0 = time.perf_counter()
    if args.cached:
        tb = build_testbed(cfg)
    else:
        with tempfile.TemporaryDirectory() as d:
            tb = build_testbed(cfg, cache_dir=d, log=lambda s: print(s, flush=True))
            rep = tb.report
    rep = tb.report if args.cached else rep
    wall = time.perf_counter() - t0
    print(f"\nbuild: {rep['build_seconds']} s (this call {wall:.1f} s), "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"SFT: chosen step {rep['sft']['chosen_step']}, dev sampled pass@1 {rep['sft']['dev_acc']:.3f}")
    for p in rep["sft"]["curve"]:
        print(f"  step {p['step']:4d}  loss {p['loss']:.3f}  dev {p['dev_acc']:.3f}  {p['elapsed_s']:6.1f}s")
    print(accuracy_table(rep["base_accuracy"]))


if __name__ == "__main__":
    main()
