"""Fewer rollouts for the same accuracy? Dynamic sampling with refill and history-based skipping on the CPU
testbed (issue 24), through verl's real trainer and the experiment runner (paired seeds, paired intervals).

    devenus experiment rollout_savings --quick     # every arm, seed 0       (estimate: 30-40 min)
    devenus experiment rollout_savings --full      # every arm, seeds 0-2    (estimate: 1.5-2 h)
    devenus experiment rollout_savings --report    # the tables and the picture from the results on disk

Plan (written 2026-12-03, before any run of this experiment; the claims are the report's, tested in direction):
- Arms, on one pool per seed: ``grpo``; ``grpo+ds`` (dynamic sampling: zero-variance groups dropped, their
  slots refilled from further prompts, at most 2 refill rounds of 16 prompts; ``devenus.dynamic_sampling``);
  ``grpo+skip`` (GRESO-style skipping before rollout from each prompt's reward history; ``devenus.skip``,
  its defaults); ``grpo+ds+skip`` (both); ``ttrl@10`` (TTRL with 10% labels, 16 votes, agreement floor 0.5:
  the weak-supervision experiment's settings) and ``ttrl@10+ds``. Every setting is the component's default;
  nothing is tuned on held-out numbers.
- Every arm trains the same number of steps (20) of 16 prompts x 8 rollouts, so each step updates on the
  same number of groups; what differs is how many rollouts a step generates (refills add, skipped prompts'
  slots are refilled by other prompts) and how informative its groups are.
- Measure: held-out ID accuracy against cumulative rollouts generated (``devenus/rollouts/generated``
  summed over steps: training, refill and vote-only rows), validated every 5 steps (steps 5, 10, 15, 20)
  and at step 0 (the ``base`` run). Reference arm: ``grpo`` for the three testbed arms, ``ttrl@10`` for
  ``ttrl@10+ds``; each is paired with its reference of the same seed.
- Claim (the issue's goal): an arm reaches its reference's final ID accuracy with at most 0.6x the
  reference's rollouts. Reported per arm: the rollouts it needed to first reach that accuracy (linear
  between validation points), as a share of the reference's total ("ratio"; its mean over seeds with a
  95% Student-t interval; verdict: the interval lies below 0.6 = shown, above = refuted, else
  inconclusive; a seed that never reaches it leaves the claim not shown and reports a lower bound);
  and the arm's accuracy at 0.6x the reference's rollouts minus the reference's final accuracy (paired
  over seeds). Also: the reference's own ratio (its first crossing of its own final accuracy; below 1.0
  when its curve plateaus or is noisy: the resolution of this measure), and the runner's table of final
  accuracy against the reference (same steps, more or fewer rollouts).
- Pool: 64 training questions drawn per seed (the same pool for every arm of a seed; 10% of it labeled for
  the TTRL arms): 20 steps x 16 prompts = 5 visits per question, refills visit more. Skipping needs
  revisits (a prompt is skipped on its zero-variance history); a one-pass sweep over the 2,000-question
  split would never skip.
- Held-out: the 512 ID questions (``test_id`` + ``test_id_extra``), T=1, 2 samples each, at every
  validation point (the cost of 4 points x 4 samples would exceed the training's); never trained or tuned
  on. One run's ID accuracy is resolved to about +-0.03 by this validation alone (experiments/README.md:
  +-0.026 at 4 samples), so a crossing between points is located only roughly; pairing over seeds is what
  the verdict rests on.
- Weights: results record their base model's hash (experiments/README.md, "Which weights"); differences
  pair only runs on the same weights.
- Budget estimate (before any run of the arms): a 2-step plumbing run of ``grpo`` (``--arm grpo --steps 2
  --jobs 1``, 2026-12-03, load average 3-5) measured start-up 57 s, step 1 21.5 s (warm-up), step 2 7.7 s,
  one 1,024-sample validation ~30 s, the base run 102 s. So a grpo run ~330 s (57 + 20 x 7.7 + 4 x 30),
  a ds run ~440 s (refill rounds: up to 3x the generation), TTRL (16 votes: 2x the generation) ~380 s and
  ~500 s with ds: ~2,500 s of run time per seed, ~30-40 min at --jobs 2 on this 2-core machine (two runs
  side by side each run ~1.5x slower). Full mode: 3x that, ~1.5-2 h (seed 0 reused from --quick).

Amendment (2026-12-03, after the first --quick run of seed 0 and before its rerun; nothing else changed):
the first run's refill rounds each drew a whole batch (16 prompts) to fill a few empty slots (the skip arm
spent 1,664 rollouts on 13 refill rounds to fill 19 skipped slots). ``devenus.dynamic_sampling``'s default
``refill_prompts=0`` now sizes each round to its need: the open slots divided by the informative share of
the prompts the step has drawn so far, at most 16 (an unfiltered round for skipped slots draws exactly
the slots left). The arms' settings are unchanged (still the component's defaults, 2 rounds at most);
every arm of seed 0 is rerun with --force; the whole-batch run's numbers stay in experiments/README.md.

Results: one JSON per (arm, seed) under experiments/results/rollout_savings/; rollout_savings.md (and
.json, .png: the runner's table and paired differences) and rollout_savings_curves.md / _curves.png (the
savings table and accuracy against rollouts, one curve per arm and seed) beside it.
"""

from __future__ import annotations

from pathlib import Path

from devenus.experiments.definition import Budget, Definition, tables_report
from devenus.experiments.pool import pool_train_file
from devenus.experiments.runner import Arm

NAME = "rollout_savings"
POOL = 64
LABELED = 0.1
GOAL = 0.6
TEST_FREQ = 5
TTRL = {"votes": 16, "min_agreement": 0.5}  # the weak-supervision experiment's settings, unchanged

DS = ("+devenus.dynamic_sampling.enabled=true", "+devenus.dynamic_sampling.max_refill_rounds=2")
SKIP = ("+devenus.skip.enabled=true",)
# every arm validates every TEST_FREQ steps (the curve's points); the runner's recipe validates at the end only
COMMON = (f"trainer.test_freq={TEST_FREQ}",)


def arms() -> tuple[Arm, ...]:
    def arm(name, method="grpo", frac=1.0, cfg=None, extra=(), baseline="base"):
        return Arm(name, method, frac, cfg or {}, COMMON + tuple(extra), baseline=baseline, claimed_side=1)

    return (
        arm("grpo"),
        arm("grpo+ds", extra=DS, baseline="grpo"),
        arm("grpo+skip", extra=SKIP, baseline="grpo"),
        arm("grpo+ds+skip", extra=DS + SKIP, baseline="grpo"),
        arm("ttrl@10", "ttrl", LABELED, TTRL),
        arm("ttrl@10+ds", "ttrl", LABELED, TTRL, DS, baseline="ttrl@10"),
    )


#: arm -> the arm whose final accuracy and rollouts it is measured against
REFERENCE = {"grpo+ds": "grpo", "grpo+skip": "grpo", "grpo+ds+skip": "grpo", "ttrl@10+ds": "ttrl@10"}


def id_validation(work: Path) -> dict[str, Path]:
    """The 512 ID questions only (near- and far-OOD would double every validation point's cost); the testbed
    keeps them in its cache, not in ``work``."""
    from devenus.experiments.runner import validation_files
    from devenus.testbed import build_testbed

    files = validation_files(build_testbed())
    return {k: files[k] for k in ("test_id", "test_id_extra")}


# ------------------------------------------------------------------------------ the savings report
def savings_table(records: dict, goal: float = GOAL) -> tuple[str, dict]:
    """The savings table (markdown) and its numbers, from the runner's records."""
    from devenus.experiments.curves import savings, zero_variance_floor
    from devenus.experiments.runner import _fmt

    rows, out, notes = [], {}, []
    pairs = [(ref, ref) for ref in sorted(set(REFERENCE.values()))] + list(REFERENCE.items())
    for arm, ref in pairs:
        try:
            s = savings(records, arm, ref, goal)
        except (KeyError, ValueError) as e:
            notes.append(f"- {arm}: {e}")
            continue
        out[arm] = s
        if not s["seeds"]:
            continue
        per = " / ".join(f"{v['ratio']:.2f}" if v["ratio"] is not None else f">{v['ratio_above']:.2f}"
                         for v in s["seeds"].values())
        rows.append(f"| {arm} | {ref} | {len(s['seeds'])} | "
                    f"{sum(v['target'] for v in s['seeds'].values()) / len(s['seeds']):.3f} | "
                    f"{sum(v['arm_rollouts'] for v in s['seeds'].values()) / len(s['seeds']):.0f} | {per} | "
                    f"{_fmt(s.get('ratio'), signed=False)} | {s.get('verdict', '-') if arm != ref else '(its own)'} | "
                    f"{_fmt(s.get('delta_at_goal'))} |")
    head = (f"| arm | reference | seeds | reference's final ID | rollouts generated (mean) | ratio per seed | "
            f"ratio (mean ± 95%) | verdict (ratio < {goal:g}) | ΔID at {goal:g}x reference's rollouts |\n"
            + "|---" * 9 + "|\n")
    text = (f"{NAME}: rollouts to first reach the reference's final held-out ID accuracy, as a share of the "
            f"reference's rollouts (linear between validation points; '>x': not reached, x = the arm's total); "
            f"reference rows: the reference's own first crossing (the measure's resolution).\n\n"
            + head + "\n".join(rows) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else ""))
    floors = {arm: f for arm in REFERENCE if (f := zero_variance_floor(records, arm))["seeds"]}
    if floors:
        lines = []
        for arm, f in floors.items():
            per = " / ".join(f"{v['share']:.3f}" for v in f["seeds"].values())
            lines.append(f"| {arm} | {len(f['seeds'])} | {per} | {_fmt(f['share'], signed=False)} | {f['floor']:.2f} |")
        text += ("\nZero-variance groups (`devenus/sampling/zero_variance_share`, mean over training steps): an arm "
                 "that generated only informative groups, for the same steps, would still spend (1 - share) of "
                 "the rollouts, so a share below 1 - goal puts the goal out of reach at a fixed step count.\n\n"
                 "| arm | seeds | share per seed | share (mean ± 95%) | floor: 1 - share |\n|---|---|---|---|---|\n"
                 + "\n".join(lines) + "\n")
        out["zero_variance"] = floors
    return text, out


def plot_savings(recs: dict, numbers: dict, path: Path) -> None:
    """Accuracy against rollouts, a panel per reference, one curve per arm and seed, the reference's target."""
    from devenus.experiments.curves import arm_curves
    from devenus.experiments.plot import plot_curves

    panels, targets = {}, {}
    for ref in sorted(set(REFERENCE.values())):
        title = f"against {ref}"
        panels[title] = {arm: arm_curves(recs, arm) for arm in [ref] + [a for a, r in REFERENCE.items() if r == ref]}
        s = numbers.get(ref, {}).get("seeds", {})
        if s:
            targets[title] = (sum(v["target"] for v in s.values()) / len(s),
                              sum(v["ref_rollouts"] for v in s.values()) / len(s), GOAL)
    plot_curves(NAME, panels, path, targets)


DEFINITION = Definition(
    name=NAME,
    summary="held-out ID accuracy against rollouts generated: dynamic sampling and skipping, GRPO and TTRL@10",
    arms=arms(),
    # lr and KL as in the weak-supervision experiment (set there before any held-out number was seen)
    budget=Budget(steps=20, prompts_per_step=16, rollouts_per_prompt=8, val_n=2, kl_coef=0.01, lr=5e-5),
    train_file=pool_train_file(POOL),
    validation=id_validation,
    # the savings table (<name>_curves.md, .json) and the curves (_curves.png) beside the runner's table
    report=tables_report("curves", lambda exp, recs: savings_table(recs), plot_savings),
)
