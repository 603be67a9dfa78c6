"""What the new step seams (dynamic sampling, skipping, the collapse guard; issue 24) cost a training step
when they are off. Two measures:

    python bench/sampling_overhead.py --profile [--steps 12 --skip 2]          # direct, one run
    python bench/sampling_overhead.py --absent 5e176a7 [--pairs 3 --steps 12]  # A/B against an older tree

**--profile** (the precise one): one GRPO run of this checkout with the seams off, its driver process under
cProfile (the CPU backend runs fit() in the launching process, ``devenus.task_runner=driver``). Each seam's
own time is its wrapper's cumulative time minus the calls it wraps (verl's or DE-Venus's pre-existing work,
:data:`OFF_PATH`), from the profile's caller table; per step against the same run's mean
``timing_s/step``. It includes cProfile's own per-call cost, so it is an upper bound. Not counted: a few
inline lines in pre-existing functions (a rollout counter, one metric, one ``is None`` test), attribute
operations of well under a microsecond each.

**--absent** (end to end, noisy):

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


#: verl's phase timers; update_actor, the agent loop's generation and the weight sync run in workers where no
#: seam runs, so their ratios show the machine's noise beside the step's
PHASES = ("timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor", "timing_s/update_weights", "timing_s/step")


def phase_ratios(present: list[dict], absent: list[dict], skip: int, phases=PHASES) -> dict[str, float]:
    """Per phase, the sum over the common steps after the warm-up, present / absent."""
    def sums(rows):
        return {ph: {int(m["step"]): float(m[ph]) for m in rows if int(m["step"]) > skip and ph in m} for ph in phases}

    p, a = sums(present), sums(absent)
    out = {}
    for ph in phases:
        common = sorted(set(p[ph]) & set(a[ph]))
        den = sum(a[ph][s] for s in common)
        if common and den > 0:
            out[ph] = sum(p[ph][s] for s in common) / den
    return out


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


#: The seams' code that runs when they are off: (file, function, the DE-Venus calls inside it that are not the
#: seam's own cost, when it runs). Calls into verl from a seam are always the wrapped work, never its cost.
#: ``step``: once per training step (or generation call); ``run``: once per run.
OFF_PATH: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    # the rollout wrapper: without a pre-rollout filter it calls the supervised generation straight away
    ("devenus/adapters/verl/trainer.py", "generate_with_supervision",
     ("supervised", "_generate_filtered", "generate_unless_stopped"), "step"),
    # the collapse guard's stop check in front of verl's generation
    ("devenus/adapters/verl/collapse.py", "generate_unless_stopped", (), "step"),
    # the sampling seam: off, it is verl's log-prob pass (and DE-Venus's late surfaces) unchanged
    ("devenus/adapters/verl/trainer.py", "_compute_old_log_prob", ("_log_prob_pass",), "step"),
    # the collapse guard after the update: disabled, one cached check
    ("devenus/adapters/verl/collapse.py", "collapse_guard_step", (), "step"),
    ("devenus/adapters/verl/collapse.py", "fit", (), "run"),
    ("devenus/adapters/verl/collapse.py", "init_workers", (), "run"),
    ("devenus/adapters/verl/collapse.py", "_save_checkpoint", (), "run"),
    ("devenus/adapters/verl/collapse.py", "_load_checkpoint", (), "run"),
)


def _in_verl(func) -> bool:
    path = func[0].replace(os.sep, "/")
    return "/verl/" in path and "/devenus/" not in path  # verl itself, not devenus/adapters/verl


def seam_costs(stats, path_map=OFF_PATH) -> list[dict]:
    """Per seam of ``path_map``: calls, and own seconds (cumulative minus the wrapped calls made from it: every
    call into verl, and the DE-Venus functions named), from ``pstats.Stats.stats`` (``{(file, line, name):
    (cc, nc, tt, ct, callers)}``, callers ``{(file, line, name): (cc, nc, tt, ct)}``). A seam never called
    is reported with 0 calls."""
    out = []
    for file, name, wrapped, when in path_map:
        funcs = [f for f in stats if f[2] == name and f[0].replace(os.sep, "/").endswith(file)]
        calls = own = 0.0
        for f in funcs:
            cc, nc, tt, ct, _ = stats[f]
            inner = sum(entry[4][f][3] for g, entry in stats.items()
                        if f in entry[4] and (_in_verl(g) or g[2] in wrapped))
            calls, own = calls + nc, own + max(0.0, ct - inner)
        out.append({"seam": f"{file.rsplit('/', 1)[-1]}:{name}", "when": when, "calls": int(calls), "own_s": own})
    return out


def profile_summary(costs: list[dict], steps: int, mean_step_s: float, limit: float) -> dict:
    """The seams' own time per step (per-run seams spread over the run's steps) against the mean step."""
    per_step = sum(c["own_s"] for c in costs) / max(1, steps)
    ratio = 1.0 + per_step / mean_step_s
    return {"steps": steps, "mean_step_s": mean_step_s, "seams_s_per_step": per_step, "ratio": ratio,
            "limit": limit, "within": ratio <= limit, "costs": costs}


def run_profiled(tb, out: Path, steps: int, timeout_s: float) -> tuple[list[dict], Path]:
    from devenus.runs import launch
    from devenus.runs.testbed import RunConfig, overrides

    cfg = RunConfig(method="grpo", steps=steps, val_before_train=False, extra_overrides=("trainer.test_freq=-1",))
    prof = out.resolve() / "driver.prof"
    r = launch(overrides(tb, out.resolve(), cfg), out, timeout_s=timeout_s,
               entry=("-m", "cProfile", "-o", str(prof), "-m", "devenus.train"))
    r.check(f"the profiled bench run in {out}")
    if not prof.exists():
        raise SystemExit(f"sampling_overhead: the run ended without writing its profile {prof}")
    return r.metrics, prof


def profile_main(args) -> int:
    import pstats

    from devenus.testbed import build_testbed

    tb = build_testbed()
    work = Path(args.work or tempfile.mkdtemp(prefix="devenus-seam-profile-"))
    print(f"[bench] one profiled GRPO run ({args.steps} steps, seams off) in {work} ...", flush=True)
    metrics, prof = run_profiled(tb, work / "profiled", args.steps, args.timeout)
    times = step_times(metrics, args.skip)
    steps = sum(1 for m in metrics if int(m["step"]) > 0 and "timing_s/step" in m)
    s = profile_summary(seam_costs(pstats.Stats(str(prof)).stats), steps, statistics.mean(times.values()), args.limit)
    print(f"\n{'seam':42s} {'when':>5s} {'calls':>6s} {'own ms':>9s} {'us/step':>9s}")
    for c in s["costs"]:
        print(f"{c['seam']:42s} {c['when']:>5s} {c['calls']:6d} {1e3 * c['own_s']:9.3f} {1e6 * c['own_s'] / max(1, steps):9.1f}")
    print(f"\nseams off, own time: {1e6 * s['seams_s_per_step']:.1f} us per step against a mean step of "
          f"{s['mean_step_s']:.2f} s (steps {args.skip + 1}..{args.steps}, profiled driver): step-time ratio "
          f"{s['ratio']:.6f}; limit {args.limit}: {'within' if s['within'] else 'EXCEEDED'}")
    if args.out:
        Path(args.out).write_text(json.dumps({**s, "work": str(work)}, indent=1))
    return 0 if s["within"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--profile", action="store_true", help="one profiled run: the seams' own time per step")
    mode.add_argument("--absent", help="git ref of a commit without the seams (A/B pairs of runs)")
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
    if args.profile:
        return profile_main(args)

    from devenus.testbed import build_testbed

    tb = build_testbed()
    work = Path(args.work or tempfile.mkdtemp(prefix="devenus-sampling-bench-"))
    trees = {"absent": extract_tree(args.absent, work / "absent_tree"), "present": ROOT / "src"}
    present_extra = tuple(o for o in args.present_overrides.split(",") if o)
    ratios, same, phases = [], [], []
    for i in range(args.pairs):
        order = ("absent", "present") if i % 2 == 0 else ("present", "absent")
        m = {}
        for arm in order:
            print(f"[bench] pair {i + 1}/{args.pairs}: {arm} ({args.steps} steps) ...", flush=True)
            m[arm] = run_one(tb, work / f"pair{i}_{arm}", args.steps, trees[arm],
                             present_extra if arm == "present" else (), args.timeout)
        ratios.append(pair_ratio(m["present"], m["absent"], args.skip))
        phases.append(phase_ratios(m["present"], m["absent"], args.skip))
        same.append(same_samples(m["present"], m["absent"]))
        p, a = step_times(m["present"], args.skip), step_times(m["absent"], args.skip)
        print(f"[bench] pair {i + 1}: absent {sum(a.values()):.2f} s, present {sum(p.values()):.2f} s over steps "
              f"{args.skip + 1}..{args.steps}: ratio {ratios[-1]:.4f}; same samples: {same[-1]}; by phase "
              + ", ".join(f"{k.split('/', 1)[1]} {v:.3f}" for k, v in phases[-1].items()), flush=True)
    s = {**summary(ratios, args.limit), "same_samples": same, "phases": phases, "absent": args.absent, "steps": args.steps,
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
