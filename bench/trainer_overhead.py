"""DE-Venus trainer overhead vs plain verl GRPO, and the CPU end-to-end run's wall time and peak memory.

    python bench/trainer_overhead.py [--steps 12]

Three arms on the same testbed data, seeds and batch shape, one after another (never in parallel):
  verl      python -m verl.trainer.main_ppo (legacy trainer, CPU backend, DE-Venus's reward function)
  grpo      python -m devenus.train devenus.method=grpo   (every surface is the identity)
  ttrl      python -m devenus.train devenus.method=ttrl   (10% labels; majority vote on the rest)

Two views of the overhead: the step-time ratio against plain verl (noisy: +-20% on this machine, and
sampled responses differ in length between runs), and the time DE-Venus's own hooks took inside each
step (`devenus/timing_s/hooks`, measured in-process; it does not depend on run-to-run noise).
Peak memory is the largest sum of proportional set sizes (PSS) over the run's process tree, sampled
every 0.5 s: shared library pages are counted once, not once per Ray process.
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


def tree_pss_bytes(pid: int) -> int:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def run_arm(cmd: list[str], env: dict, log: Path) -> tuple[float, int, list[dict]]:
    """Wall time, peak PSS of the run's process tree, and its per-step metrics (verl's file tracker)."""
    from devenus.runs import read_metrics, with_file_logger

    metrics = log.with_suffix(".metrics.jsonl")
    cmd = with_file_logger(cmd)
    env = {**env, "VERL_FILE_LOGGER_PATH": str(metrics)}
    t0 = time.perf_counter()
    peak = [0]
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], tree_pss_bytes(proc.pid))
                stop.wait(0.5)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        proc.wait()
        stop.set()
        t.join()
    if proc.returncode != 0:
        raise SystemExit(f"{log}: exit code {proc.returncode}")
    return time.perf_counter() - t0, peak[0], read_metrics(metrics)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2, help="warm-up steps excluded from step-time statistics")
    args = ap.parse_args()

    from devenus.adapters.verl.cpu.launch import cpu_env, cpu_overrides
    from devenus.runs.testbed import RunConfig, overrides
    from devenus.records import hide_labels, read_records, write_records
    from devenus.testbed import build_testbed

    tb = build_testbed()
    work = Path(tempfile.mkdtemp(prefix="devenus-bench-"))
    semi = work / "train_10pct.parquet"
    write_records(hide_labels(read_records(tb.split("train")), 0.1, seed=0), semi)
    quiet = ("trainer.val_before_train=False", "trainer.test_freq=-1")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def devenus_cmd(method, train_file=None):
        cfg = RunConfig(method=method, steps=args.steps, train_file=train_file, extra_overrides=quiet)
        return [sys.executable, "-m", "devenus.train", *overrides(tb, work / method, cfg)]

    verl_ovr = [o for o in overrides(tb, work / "verl", RunConfig(steps=args.steps, extra_overrides=quiet))
                if not o.startswith("devenus.")]
    verl_cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *cpu_overrides(), *verl_ovr,
                "reward.custom_reward_function.path=pkg://devenus.verify.reward",
                "reward.custom_reward_function.name=compute_score"]
    arms = [("verl", verl_cmd, cpu_env(env)), ("grpo", devenus_cmd("grpo"), env), ("ttrl", devenus_cmd("ttrl", str(semi)), env)]

    rows = []
    for name, cmd, arm_env in arms:
        print(f"[bench] {name}: {args.steps} steps ...", flush=True)
        wall, peak, metrics = run_arm(cmd, arm_env, work / f"{name}.log")
        ms = [m for m in metrics if m["step"] > args.skip and "timing_s/step" in m]
        step = [m["timing_s/step"] for m in ms]
        hooks = [m.get("devenus/timing_s/hooks", 0.0) for m in ms]
        rows.append((name, wall, peak, statistics.mean(step), statistics.stdev(step) if len(step) > 1 else 0.0,
                     statistics.mean(hooks), ms))
    base = rows[0][3]
    print(f"\nsteps {args.skip + 1}..{args.steps} of each run (batch 16 prompts x 8 rollouts); logs in {work}")
    print(f"{'arm':6} {'wall s':>7} {'peak PSS GB':>11} {'step s (mean+-sd)':>18} {'vs verl':>8} {'hooks s':>8} {'hooks/step':>10}")
    for name, wall, peak, mean, sd, hooks, _ in rows:
        print(f"{name:6} {wall:7.1f} {peak / 2**30:11.2f} {mean:9.3f} +- {sd:5.3f} {mean / base:8.3f} {hooks:8.4f} {hooks / mean:10.4f}")
    ttrl = rows[2][6]
    acc = [m["devenus/target/accuracy"] for m in ttrl if "devenus/target/accuracy" in m]
    if acc:
        print(f"ttrl pseudo-label accuracy (vs hidden truth): mean {statistics.mean(acc):.3f} over {len(acc)} steps")


if __name__ == "__main__":
    main()
