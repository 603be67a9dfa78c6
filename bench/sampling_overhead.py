"""What the sampling seams (dynamic sampling, skipping; issue 24) cost a training step when they are off.

    python bench/sampling_overhead.py --absent 5e176a7 [--pairs 3 --steps 12 --skip 2]

Two code trees, one bench run: ``absent`` is ``src/`` of git ref ``--absent`` (a commit before the seams,
extracted with ``git archive`` into a temp folder, put first on PYTHONPATH), ``present`` is this checkout's
``src/`` with the seams in and off (their defaults; ``--present-overrides`` adds keys). Both train the same
GRPO run on the testbed (16 prompts x 8 rollouts, no validation), one run at a time, in pairs whose order
alternates (ABBA...) so drift in the machine's load falls on both. The CPU rollout server seeds every
request, so both trees sample the same responses when the seams are truly off: the bench checks that
(``response_length/mean`` per step equal) and says so, since otherwise a time difference would include
different work.

Printed: per pair, the sum of ``timing_s/step`` over steps ``skip+1..steps`` (verl's file tracker), the
ratio present / absent, the median of the pairs' ratios (the number the issue bounds: within 1.02) and
the 95% Student-t interval of their mean (the bound is shown only when its top is within the limit).
Exit status 1 when the median exceeds ``--limit``. Run under ``flock /tmp/devenus-heavy.lock``, on a
machine as quiet as can be had: two runs of one commit (``--absent HEAD``, 4 steps) differed by 11% in
step time here at load average 3-5 (ratio 0.891), so resolving 2% takes many pairs or an idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def extract_tree(ref: str, dest: Path, repo: Path = ROOT) -> Path:
    """``src/`` of ``ref`` under ``dest`` (``git archive``: the repository itself is not touched)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / "src.tar"
    r = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "-o", str(archive), ref, "src"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sampling_overhead: git archive of {ref!r} failed: {r.stderr.strip()}")
    with tarfile.open(archive) as t:
        t.extractall(dest, filter="data")
    archive.unlink()
    return dest / "src"


def step_times(metrics: list[dict], skip: int) -> dict[int, float]:
    """Step -> ``timing_s/step`` for the steps after the first ``skip`` (warm-up)."""
    return {int(m["step"]): float(m["timing_s/step"]) for m in metrics
            if int(m["step"]) > skip and "timing_s/step" in m}


def pair_ratio(present: list[dict], absent: list[dict], skip: int) -> float:
    """Sum of step times, present / absent, over the steps both runs logged after the warm-up."""
    p, a = step_times(present, skip), step_times(absent, skip)
    common = sorted(set(p) & set(a))
    if not common:
        raise ValueError(f"no step after the first {skip} is in both runs' metrics")
    return sum(p[s] for s in common) / sum(a[s] for s in common)


def same_samples(present: list[dict], absent: list[dict], key: str = "response_length/mean") -> bool:
    """Whether both runs logged the same ``key`` at every step (the same sampled responses)."""
    p = {m["step"]: m.get(key) for m in present}
    a = {m["step"]: m.get(key) for m in absent}
    return bool(p) and p == a


def summary(ratios: list[float], limit: float) -> dict:
    """The median ratio against ``limit``, and the 95% Student-t interval of the mean ratio over pairs: the
    bound is *shown* only when that interval's top is within ``limit`` (two runs of one commit differed by
    11% in step time here under a shared load, so one pair resolves nothing)."""
    from devenus.experiments.stats import mean_interval

    med = statistics.median(ratios)
    iv = mean_interval(ratios)
    return {"pairs": len(ratios), "ratios": ratios, "median": med, "limit": limit, "within": med <= limit,
            "mean": iv.mean, "half_width": iv.half_width,
            "shown": (not math.isnan(iv.half_width)) and iv.high <= limit}


def run_one(tb, out: Path, steps: int, src: Path, extra: tuple[str, ...], timeout_s: float) -> list[dict]:
    from devenus.runs import launch
    from devenus.runs.testbed import RunConfig, overrides

    cfg = RunConfig(method="grpo", steps=steps, val_before_train=False,
                    extra_overrides=("trainer.test_freq=-1", *extra))
    env = {"PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    r = launch(overrides(tb, out.resolve(), cfg), out, timeout_s=timeout_s, env=env)
    r.check(f"the bench run in {out}")
    return r.metrics


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--absent", required=True, help="git ref of a commit without the seams (e.g. the merge base)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2, help="warm-up steps left out of the step times")
    ap.add_argument("--limit", type=float, default=1.02)
    ap.add_argument("--present-overrides", default="", help="comma-separated overrides for the present tree")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    ap.add_argument("--work", help="folder for the runs (default: a temp folder)")
    ap.add_argument("--out", help="write the summary as JSON here")
    args = ap.parse_args(argv)
    if args.steps <= args.skip:
        ap.error(f"--steps ({args.steps}) must exceed --skip ({args.skip})")

    from devenus.testbed import build_testbed

    tb = build_testbed()
    work = Path(args.work or tempfile.mkdtemp(prefix="devenus-sampling-bench-"))
    trees = {"absent": extract_tree(args.absent, work / "absent_tree"), "present": ROOT / "src"}
    present_extra = tuple(o for o in args.present_overrides.split(",") if o)
    ratios, same = [], []
    for i in range(args.pairs):
        order = ("absent", "present") if i % 2 == 0 else ("present", "absent")
        m = {}
        for arm in order:
            print(f"[bench] pair {i + 1}/{args.pairs}: {arm} ({args.steps} steps) ...", flush=True)
            m[arm] = run_one(tb, work / f"pair{i}_{arm}", args.steps, trees[arm],
                             present_extra if arm == "present" else (), args.timeout)
        ratios.append(pair_ratio(m["present"], m["absent"], args.skip))
        same.append(same_samples(m["present"], m["absent"]))
        p, a = step_times(m["present"], args.skip), step_times(m["absent"], args.skip)
        print(f"[bench] pair {i + 1}: absent {sum(a.values()):.2f} s, present {sum(p.values()):.2f} s over steps "
              f"{args.skip + 1}..{args.steps}: ratio {ratios[-1]:.4f}; same samples: {same[-1]}", flush=True)
    s = {**summary(ratios, args.limit), "same_samples": same, "absent": args.absent, "steps": args.steps,
         "skip": args.skip, "work": str(work)}
    print(f"\nseams present but off / absent, step time: median ratio {s['median']:.4f} over {len(ratios)} pairs "
          f"({', '.join(f'{r:.4f}' for r in ratios)}); limit {args.limit}: {'within' if s['within'] else 'EXCEEDED'}"
          + (f"; mean {s['mean']:.4f} +- {s['half_width']:.4f} (95%, over pairs): the bound is "
             f"{'shown' if s['shown'] else 'not resolved'}" if len(ratios) > 1 else "; one pair: no interval")
          + ("" if all(same) else "; WARNING: the trees sampled different responses, so the runs did different work"))
    if args.out:
        Path(args.out).write_text(json.dumps(s, indent=1))
    return 0 if s["within"] else 1


if __name__ == "__main__":
    sys.exit(main())
