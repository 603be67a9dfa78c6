"""TraPO with 10% of the labels against GRPO with all of them, run long enough for TraPO to act: the design of
``experiments/plans/trapo_ten_percent.md`` (written before any run).

    devenus experiment trapo_ten_percent --seed 0      # one seed's two runs and its base validation
    devenus experiment trapo_ten_percent --full        # seeds 0-4
    devenus experiment trapo_ten_percent --report      # the table from the results on disk

- Arms: ``grpo_full`` (every label) and ``trapo@10`` (the labeled 10% plus the unlabeled groups TraPO admits,
  trained against their majority answer). One claim: ``trapo@10`` equals ``grpo_full`` within ±0.03 (side 0).
- Pool: ``ten_percent_labels``' pools (:data:`POOL` questions per seed stratified on the base pass rate, drawn
  for that experiment's name, so the same questions and the same 51 labeled ones per seed).
- :data:`STEPS` steps x 16 prompts = 5 visits per question; TraPO's ``warmup`` 2 scores an unlabeled question
  from its third visit, so admission is decided on 3 of 5 visits (during warm-up only labeled rows train).
"""

from __future__ import annotations

from devenus.experiments.definition import Budget, Definition, text_report
from devenus.experiments.definitions import refine_mechanism as mechanism_rule
from devenus.experiments.definitions import ten_percent_labels as predecessor
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import Arm

NAME = "trapo_ten_percent"
POOL = predecessor.POOL
PROMPTS = 16  # per step, as in ten_percent_labels
VISITS = 5
STEPS = VISITS * POOL // PROMPTS  # 160
WARMUP = 2  # refine_mechanism's: scored from visit 3
#: the last step of TraPO's warm-up: 2 visits of every question (512 / 16 = 32 steps an epoch, none dropped);
#: from the next step on, every unlabeled group is scored
WARMUP_STEPS = WARMUP * POOL // PROMPTS
SEEDS = (0, 1, 2, 3, 4)
MARGIN = 0.03  # the plan's pre-registered equivalence margin (ID accuracy)
MECHANISM_MARGIN = 0.05  # refine_mechanism's, for the admitted-minus-rejected precision
CLAIMS = (("trapo@10", "grpo_full", 0),)


def scored_mechanism(curves: list, after_step: int = 0) -> dict:
    """:func:`~devenus.experiments.mechanism.run_mechanism` over a run's steps after ``after_step`` only."""
    from devenus.experiments.mechanism import run_mechanism

    return run_mechanism([c for c in curves if int(c.get("step", 0)) > after_step])


def report_text(recs: dict) -> str:
    """The plan's two readings from finished records (``(arm, seed) -> result``): the mechanism first, then the
    claim (no verdict before every planned seed has finished).

    The mechanism, as the plan defines it, compares the admitted with the rejected among the unlabeled groups
    TraPO *scored*: the steps after :data:`WARMUP_STEPS`. The logged ``admission/rejected_precision`` also
    counts the warm-up's groups, which are dropped unscored, from an earlier and weaker policy; it is shown
    pooled as a description."""
    from devenus.experiments.mechanism import pooled_mechanism
    from devenus.experiments.stats import decide_claims, mean_interval

    curves = {seed: r.get("curves") or [] for (name, seed), r in sorted(recs.items()) if name == "trapo@10"}
    scored = {seed: scored_mechanism(c, WARMUP_STEPS) for seed, c in curves.items()}
    lines = [f"{NAME}: TraPO's admission against the simulation's truth, among the groups it scored (steps after "
             f"{WARMUP_STEPS}: visits {WARMUP + 1}-{VISITS}); every interval allows for {VISITS} visits per question "
             f"(variance x {VISITS}); margin ±{MECHANISM_MARGIN}. Then its claim (paired t test and TOST at ±{MARGIN}; "
             f"no verdict before all {len(SEEDS)} seeds).", "",
             "| seed | admitted pseudo-label precision | rejected (scored, not admitted) | admitted minus rejected (95%) | verdict |",
             "|---|---|---|---|---|"]
    lines += [f"| {seed} | {admission_row(m)} |" for seed, m in scored.items()]
    every = {seed: scored_mechanism(c) for seed, c in curves.items()}
    lines.append(f"| pooled | {admission_row(pooled_mechanism(scored))} |")
    lines.append(f"| pooled, every unlabeled group (warm-up included: description) | {admission_row(pooled_mechanism(every))} |")
    lines += ["", "| claim | ΔID per seed | ΔID ± 95% (seeds) | p (difference) | p (TOST) | verdict |", "|---|---|---|---|---|---|"]
    for c in decide_claims(recs, CLAIMS, MARGIN, min_seeds=len(SEEDS)):
        per_seed = " / ".join(f"{d:+.3f}" for d in c.diffs) or "-"
        if c.decision is None:
            lines.append(f"| {c.arm} vs {c.ref}, = | {per_seed} | - | - | - | not read: {len(c.seeds)} of "
                         f"{len(SEEDS)} seeds finished |")
            continue
        lines.append(f"| {c.arm} vs {c.ref}, = | {per_seed} | {mean_interval(c.diffs).fmt()} ({len(c.diffs)}) | "
                     f"{c.decision.p_diff:.4f} | {c.decision.p_equiv:.4f} | {c.verdict} |")
    return "\n".join(lines) + "\n"


def admission_row(m: dict, visits: int = VISITS) -> str:
    """One run's (or a pool of runs') admitted and rejected counts, their difference and its verdict at
    :data:`MECHANISM_MARGIN` with every variance x ``visits`` (``trapo_confirm`` bounds the design effect by the 3
    scored visits instead; :func:`~devenus.experiments.definitions.refine_mechanism.admission_cells`), as one
    table row's cells."""
    return " | ".join(mechanism_rule.admission_cells(m, visits, MECHANISM_MARGIN))


DEFINITION = Definition(
    name=NAME,
    summary="TraPO with 10% labels vs GRPO with all labels, 5 visits a question on ten_percent_labels' pools",
    arms=(
        Arm("grpo_full", "grpo", 1.0),
        Arm("trapo@10", "trapo", predecessor.LABELED, {"warmup": WARMUP}, baseline="grpo_full", claimed_side=0),
    ),
    budget=Budget(steps=STEPS, prompts_per_step=PROMPTS, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    seeds=SEEDS,
    train_file=stratified_train_file(POOL, drawn_for=predecessor.DEFINITION.name),
    report=text_report("verdicts", lambda exp: report_text(exp.finished())),
)
