"""Launch-to-finish time of a short ``devenus.train`` run with verl's task runner in its own Ray actor
(``devenus.task_runner=ray``, verl's topology: the baseline) against in the driver (``driver``, the CPU
backend's choice), alternating arms, one run at a time.

    python bench/task_runner_startup.py [--trials 3] [--steps 2]

Each run: GRPO on the testbed, 4 prompts x 4 rollouts per step, no validation, no checkpoint, so the
wall time is almost all start-up. Printed: every run's wall time, seconds from launch to the first
step line, the CPU seconds of the run's whole process tree (what a launch costs a machine that runs
two at a time, as the test suite does), per arm the medians, and the ratios driver / ray.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ARMS = ("ray", "driver")


def run_once(cmd: list[str], log: Path) -> tuple[float, float | None, float]:
    """Wall time, time to the first step line, and the CPU seconds of the run's process tree (each
    process's user + system time, sampled every 0.25 s: a process loses at most its last 0.25 s)."""
    import psutil

    cpu: dict[int, float] = {}
    stop = threading.Event()

    def sample(root: psutil.Process) -> None:
        while not stop.is_set():
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for p in procs:
                try:
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            stop.wait(0.25)

    t0 = time.perf_counter()
    first = None
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        sampler = threading.Thread(target=sample, args=(psutil.Process(proc.pid),), daemon=True)
        sampler.start()
        for line in proc.stdout:
            if first is None and "step:1 -" in line:
                first = time.perf_counter() - t0
            f.write(line)
        proc.wait()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{log}: exit code {proc.returncode}")
    return wall, first, sum(cpu.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()

    from devenus.runs.testbed import RunConfig, overrides
    from devenus.testbed import build_testbed

    tb = build_testbed()
    work = Path(tempfile.mkdtemp(prefix="devenus-bench-runner-"))
    cfg = RunConfig(steps=args.steps, prompts_per_step=4, rollouts_per_prompt=4, save_freq=-1,
                    val_before_train=False, extra_overrides=("trainer.test_freq=-1",))
    rows: dict[str, list[tuple[float, float | None, float]]] = {a: [] for a in ARMS}
    for trial in range(args.trials):
        for arm in ARMS if trial % 2 == 0 else ARMS[::-1]:
            out = work / f"{arm}{trial}"
            cmd = [sys.executable, "-m", "devenus.train", *overrides(tb, out, cfg), f"devenus.task_runner={arm}"]
            wall, first, cpu = run_once(cmd, out.with_suffix(".log"))
            rows[arm].append((wall, first, cpu))
            print(f"[bench] trial {trial} {arm:6}: wall {wall:6.1f} s, first step at {first or float('nan'):6.1f} s, "
                  f"CPU {cpu:6.1f} s", flush=True)
    print(f"\n{args.steps}-step runs, no validation; logs in {work}")
    print(f"{'task runner':12} {'wall s (median)':>16} {'first step s':>13} {'CPU s':>7}")
    med = {}
    for arm in ARMS:
        w = statistics.median(r[0] for r in rows[arm])
        f = statistics.median(r[1] for r in rows[arm] if r[1] is not None)
        c = statistics.median(r[2] for r in rows[arm])
        med[arm] = (w, f, c)
        print(f"{arm:12} {w:16.1f} {f:13.1f} {c:7.1f}")
    print(f"{'driver / ray':12} {med['driver'][0] / med['ray'][0]:16.2f} {med['driver'][1] / med['ray'][1]:13.2f} "
          f"{med['driver'][2] / med['ray'][2]:7.2f}")


if __name__ == "__main__":
    main()
