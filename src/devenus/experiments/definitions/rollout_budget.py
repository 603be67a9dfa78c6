"""Runs to a rollout budget, not a step count: do dynamic sampling and history-based skipping reach GRPO's
accuracy levels with fewer rollouts? The design of ``experiments/plans/rollout_savings.md`` (written before
any run); ``rollout_savings`` is the old design, kept with its results.

    devenus experiment rollout_budget --quick     # every arm, seed 0
    devenus experiment rollout_budget --full      # every arm, seeds 0-2
    devenus experiment rollout_budget --report    # the tables and the picture from the results on disk

- Arms, on one pool per seed: ``grpo`` (the reference); ``grpo+ds`` (dynamic sampling: zero-variance groups
  dropped and their slots refilled, at most 2 refill rounds; ``devenus.dynamic_sampling``); ``grpo+skip``
  (GRESO-style skipping before rollout from each prompt's reward history; ``devenus.skip``); ``grpo+ds+skip``
  (both). Every setting is the component's default, as in the old design; nothing is tuned on held-out numbers.
- Budget: each run stops at the first validation step at or after it has generated :data:`ROLLOUTS` = 4,096
  rollouts (``devenus.budget.rollouts``; ``devenus/rollouts/generated`` summed over steps: training, refill and
  vote-only rows), what plain GRPO spends in 32 steps of 16 prompts x 8 rollouts; :data:`STEP_CAP` steps is the
  most a run may take (an arm that skips gets more steps for the same rollouts). lr 5e-5, KL 0.01.
- Pool: :data:`POOL` questions per seed stratified on the base model's pass rate (:mod:`devenus.experiments.pool`:
  pass rates spread around 0.5), so the budget visits each question 4 times (skipping needs earlier visits);
  its zero-variance share (questions at pass rate 0 or 1 over 8 base samples)
  is written beside the results (``rollout_budget_pool.json``) and reported.
- Held-out: the 512 ID questions (``test_id`` + ``test_id_extra``), T=1, avg@2, every :data:`TEST_FREQ` steps
  and at step 0 (the ``base`` run); never trained or tuned on.
- Primary: rollouts to first reach ID accuracy :data:`LEVELS` (linear between validation points,
  :func:`devenus.experiments.curves.rollouts_to_reach`), per arm and seed; the ratio to the reference's of the
  same seed, mean over seeds with its 95% Student-t interval (:data:`PAIRS`). A level a run never reached
  gives a bound ('>' the run's total where the arm did not, '<' where the reference did not).
- Secondary: rollout wall-clock to reach the same levels (``devenus/timing_s/generation`` summed: training
  generation, refill rounds and vote generations included), ``grpo+ds+skip`` vs ``grpo+ds`` (GRESO's measure);
  final ID accuracy (the last validation: the stop step), claims :data:`CLAIMS` (``experiments/power.py``,
  plan ``rollout_savings``; one Holm family, TOST at ±:data:`MARGIN`), also decided in the report.
- Mechanism: skip precision (``devenus/skip/precision``: audited skipped prompts whose group had zero
  variance), and each arm's zero-variance share of generated groups per step.

Results: one JSON per (arm, seed) under experiments/results/rollout_budget/; rollout_budget.md (.json, .png: the
runner's table) and rollout_budget_curves.md (.json, .png: the tables below, accuracy against rollouts) beside
it. Nothing here has run on a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from devenus.experiments.definition import Budget, Definition, tables_report
from devenus.experiments.definitions.rollout_savings import DS, SKIP, id_validation
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import BASE, Arm, Experiment
from devenus.online.sampling.dynamic_sampling import GENERATION_S, ROLLOUTS_GENERATED

NAME = "rollout_budget"
#: 128, not the plan's 512 (its amendment, before any run): 4,096 rollouts are 512 prompt visits, so a
#: 512-question pool is seen once and skipping, which acts on a prompt's earlier visits, could not act
POOL = 128
ROLLOUTS = 32 * 16 * 8  # plain GRPO's rollouts in 32 steps
STEP_CAP = 64
TEST_FREQ = 4
LEVELS = (0.40, 0.45, 0.50, 0.55)
MARGIN = 0.03
#: the final-accuracy claims (arm, reference, claimed side), one Holm family; each arm's runner baseline
CLAIMS = (("grpo+ds+skip", "grpo+ds", 0), ("grpo+skip", "grpo", 0), ("grpo+ds", "grpo", 0))
#: (arm, reference) pairs of the rollouts-to-reach table
PAIRS = (("grpo+ds", "grpo"), ("grpo+skip", "grpo"), ("grpo+ds+skip", "grpo"), ("grpo+ds+skip", "grpo+ds"))
WALL_CLOCK = (("grpo+ds+skip", "grpo+ds"),)
SKIP_ARMS = ("grpo+skip", "grpo+ds+skip")
# every arm validates every TEST_FREQ steps (the curve's points) and stops at the budget
COMMON = (f"trainer.test_freq={TEST_FREQ}", f"+devenus.budget.rollouts={ROLLOUTS}")


def arms() -> tuple[Arm, ...]:
    baseline = {arm: ref for arm, ref, _ in CLAIMS}
    extra = {"grpo": (), "grpo+ds": DS, "grpo+skip": SKIP, "grpo+ds+skip": DS + SKIP}
    return tuple(Arm(name, "grpo", 1.0, {}, COMMON + over, baseline=baseline.get(name, BASE),
                     claimed_side=0 if name in baseline else 1) for name, over in extra.items())


_pool = stratified_train_file(POOL)


def train_file(arm: Arm, seed: int, exp: Experiment) -> Path:
    """The seed's stratified pool; its description (bins, zero-variance share) joins ``<name>_pool.json``
    beside the results (written in the runner's data pass, one thread, before any run)."""
    from devenus.atomic import write_text_atomic
    from devenus.records.versions import read_manifest

    path = _pool(arm, seed, exp)
    pools = read_pools(exp)
    if str(seed) not in pools:
        pools[str(seed)] = read_manifest(path).config
        about = exp.results.parent / f"{exp.name}_pool.json"
        about.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(about, json.dumps(pools, indent=1, sort_keys=True))
    return path


def read_pools(exp: Experiment) -> dict:
    """Seed -> its pool's description, from ``<name>_pool.json`` beside the results (none yet: empty)."""
    about = exp.results.parent / f"{exp.name}_pool.json"
    return json.loads(about.read_text()) if about.exists() else {}


# ------------------------------------------------------------------------------ the report
def reach(records: dict, pairs=PAIRS, levels=LEVELS, key: str = ROLLOUTS_GENERATED) -> tuple[dict, list[str]]:
    """Per ``"arm vs ref"`` and level: per seed the arm's and the reference's cumulative ``key`` at their first
    crossing of the level (None: never; then the run's total bounds it), the ratio or its bound, and over
    seeds the ratio's mean interval when every seed has one. Also the notes on runs left out."""
    from devenus.experiments.curves import paired_curves, rollouts_to_reach
    from devenus.experiments.stats import mean_interval

    out, notes = {}, []
    for arm, ref in pairs:
        curves = paired_curves(records, arm, ref, key=key, notes=notes)
        pair = out[f"{arm} vs {ref}"] = {}
        for level in levels:
            seeds = {}
            for seed, (a, b) in curves.items():
                if not a or not b:
                    continue
                ra, rb = rollouts_to_reach(a, level), rollouts_to_reach(b, level)
                seeds[seed] = {"arm": ra, "ref": rb, "arm_total": a[-1][0], "ref_total": b[-1][0],
                               **ratio(ra, rb, a[-1][0], b[-1][0])}
            row = {"seeds": seeds}
            if seeds and all(s["ratio"] is not None for s in seeds.values()):
                row["ratio"] = mean_interval([s["ratio"] for s in seeds.values()]).to_dict()
            pair[f"{level:g}"] = row
    return out, notes


def ratio(arm: float | None, ref: float | None, arm_total: float, ref_total: float) -> dict:
    """The arm's reach over the reference's, or the bound a level one of them never reached gives."""
    if arm is not None and ref is not None:
        return {"ratio": arm / ref if ref > 0 else None, "bound": None if ref > 0 else "both at the start"}
    if arm is None and ref is not None:
        return {"ratio": None, "bound": f">{arm_total / ref:.2f}" if ref > 0 else "arm: not reached"}
    if arm is not None:
        return {"ratio": None, "bound": f"<{arm / ref_total:.2f}" if ref_total > 0 else "reference: not reached"}
    return {"ratio": None, "bound": "neither reached"}


def _reach_lines(table: dict, unit: str) -> list[str]:
    from devenus.experiments.runner import _fmt

    def amount(x, total):
        return f"{x:.0f}" if x is not None else f">{total:.0f}"

    lines = [f"| arm vs reference | level | seeds | {unit} to reach per seed (arm / reference) | ratio per seed | "
             f"ratio (mean ± 95%) |", "|---|---|---|---|---|---|"]
    for pair, levels in table.items():
        for level, row in levels.items():
            s = row["seeds"]
            per = ", ".join(f"{amount(v['arm'], v['arm_total'])} / {amount(v['ref'], v['ref_total'])}" for v in s.values())
            ratios = ", ".join(f"{v['ratio']:.2f}" if v["ratio"] is not None else v["bound"] for v in s.values())
            lines.append(f"| {pair} | {level} | {len(s)} | {per or '-'} | {ratios or '-'} | "
                         f"{_fmt(row.get('ratio'), signed=False)} |")
    return lines


def decided_claims(records: dict) -> list[dict]:
    """The final-accuracy claims (:data:`CLAIMS`): paired ID differences over seeds on the same weights,
    TOST at ±:data:`MARGIN` and the difference test, Holm across the claims with 2 or more seeds."""
    import math

    from devenus.experiments.stats import decide_claims

    rows = []
    for c in decide_claims(records, CLAIMS, MARGIN):
        row = {"claim": f"{c.arm} vs {c.ref}", "side": c.side, "seeds": c.seeds}
        row.update({"mean": None, "verdict": "not run"} if not c.seeds else
                   {"mean": math.fsum(c.diffs) / len(c.diffs), "sd": c.decision.sd if c.decision else float("nan"),
                    "verdict": c.verdict or "one seed: not decided"})
        rows.append(row)
    return rows


def stops(records: dict) -> dict[str, dict]:
    """Per arm and seed: the steps trained, the rollouts generated, and whether the budget stopped the run."""
    out: dict[str, dict] = {}
    for (name, seed), r in sorted(records.items()):
        if name == BASE:
            continue
        curves = r.get("curves") or []
        stop = [c for c in curves if "devenus/budget/stop_step" in c]
        out.setdefault(name, {})[seed] = {"steps": max((int(c["step"]) for c in curves), default=0),
                                          "rollouts": sum(c.get(ROLLOUTS_GENERATED, 0) for c in curves),
                                          "budget_stop": bool(stop)}
    return out


def report_numbers(records: dict, pools: dict) -> tuple[str, dict]:
    """The report's text (markdown) and its numbers, from finished records and the pools' descriptions."""
    from devenus.experiments.curves import zero_variance_floor
    from devenus.experiments.mechanism import SKIP_PRECISION, run_mechanism
    from devenus.experiments.runner import _fmt

    rollouts, notes = reach(records)
    wall, wall_notes = reach(records, WALL_CLOCK, key=GENERATION_S)
    claims, ran = decided_claims(records), stops(records)
    text = [f"{NAME}: each run stops at the first validation step (every {TEST_FREQ}) at or after {ROLLOUTS} "
            f"rollouts generated (cap {STEP_CAP} steps). Crossings of held-out ID accuracy (avg@2, 512 questions) "
            f"linear between validation points; step 0 is the seed's base run.", "",
            "Where each run stopped (steps / rollouts generated per seed; * : the budget stopped it):", "",
            "| arm | seeds | steps / rollouts per seed |", "|---|---|---|"]
    for arm, seeds in ran.items():
        text.append(f"| {arm} | {len(seeds)} | " + ", ".join(
            f"{v['steps']} / {v['rollouts']:.0f}{'*' if v['budget_stop'] else ''}" for v in seeds.values()) + " |")
    text += ["", "Rollouts to reach each level ('>x': not reached, x = the run's total; ratio '>r' / '<r': the "
             "bound the unreached one gives):", ""] + _reach_lines(rollouts, "rollouts")
    text += ["", "Rollout wall-clock to reach each level (seconds of training generation, refill rounds "
             "included; GRESO's measure):", ""] + _reach_lines(wall, "generation seconds")
    text += ["", f"Final ID accuracy (the stop step's validation), claims of no difference: TOST at ±{MARGIN} and "
             f"the difference test, Holm across the claims:", "",
             "| claim | seeds | ΔID (mean) | SD | verdict |", "|---|---|---|---|---|"]
    for c in claims:
        mean, sd = c["mean"], c.get("sd")
        text.append(f"| {c['claim']} | {len(c['seeds'])} | {'-' if mean is None else format(mean, '+.3f')} | "
                    f"{'-' if sd is None else format(sd, '.3f')} | {c['verdict']} |")
    share = {seed: p.get("zero_variance_share") for seed, p in sorted(pools.items())}
    text += ["", f"Pool ({POOL} questions stratified on the base pass rate over 8 samples): zero-variance share "
             "(pass rate 0 or 1) per seed: " + (", ".join(f"seed {s}: {v:.3f}" for s, v in share.items()
                                                        if v is not None) or "no pool description found")]
    floors = {arm: f for arm in ran if (f := zero_variance_floor(records, arm))["seeds"]}
    if floors:
        text += ["", "Zero-variance share of generated groups (`devenus/sampling/zero_variance_share`, mean over "
                 "training steps):", "", "| arm | share per seed | share (mean ± 95%) |", "|---|---|---|"]
        text += [f"| {arm} | {', '.join(format(v['share'], '.3f') for v in f['seeds'].values())} | "
                 f"{_fmt(f['share'], signed=False)} |" for arm, f in floors.items()]
    precision = {}
    for (name, seed), r in sorted(records.items()):
        m = (r.get("mechanism") or run_mechanism(r.get("curves") or [])).get(SKIP_PRECISION[0])
        if name in SKIP_ARMS and m:
            precision.setdefault(name, {})[seed] = m
    text += ["", "Skip precision (audited skipped prompts whose group had zero variance / audited skips):", ""]
    text += [f"- {arm}: " + ", ".join(f"seed {s}: {m['value']:.2f} ({m['num']:g}/{m['den']:g})" for s, m in per.items())
             for arm, per in precision.items()] or ["- not logged (no skip arm has run, or no skip was audited)"]
    if notes or wall_notes:
        text += ["", "Left out:"] + notes + wall_notes
    numbers = {"rollouts_to_reach": rollouts, "wall_clock_to_reach": wall, "claims": claims, "stops": ran,
               "pool_zero_variance_share": share, "zero_variance": floors, "skip_precision": precision}
    return "\n".join(text) + "\n", numbers


def plot(recs: dict, numbers: dict, path: Path) -> Path | None:
    """Accuracy against cumulative rollouts, one line per arm and seed, the levels as lines."""
    from devenus.experiments.curves import arm_curves
    from devenus.experiments.plot import plot_curves

    panel = {name: arm_curves(recs, name) for name in sorted({n for n, _ in recs} - {BASE})}
    return plot_curves(NAME, {f"{ROLLOUTS} rollouts per run": panel}, path, levels=LEVELS)


DEFINITION = Definition(
    name=NAME,
    summary="dynamic sampling and skipping vs GRPO at an equal rollout budget (4,096), 128-question stratified pool",
    arms=arms(),
    # lr and KL as in rollout_savings (the weak-supervision experiment's, set before any held-out number)
    budget=Budget(steps=STEP_CAP, prompts_per_step=16, rollouts_per_prompt=8, val_n=2, kl_coef=0.01, lr=5e-5),
    train_file=train_file,
    validation=id_validation,
    # the tables (<name>_curves.md, .json) and accuracy against rollouts (_curves.png) beside the runner's table
    report=tables_report("curves", lambda exp, recs: report_numbers(recs, read_pools(exp)), plot),
)
