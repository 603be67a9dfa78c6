"""``semi_confirm``'s design on new seeds, decided with the run as the unit: the plan
``experiments/plans/semi_paired.md`` (written before any run). One difference per seed (``semi@40``'s
pseudo-target precision minus ``ttrl@0``'s on the same pool), a paired t test and TOST at the mechanism margin.

    devenus experiment semi_paired --full      # seeds 5-8
    devenus experiment semi_paired --report    # the table from the results on disk
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, text_report
from devenus.experiments.definitions import refine_mechanism as pilot
from devenus.experiments.definitions import semi_confirm
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.stats import decide, mean_interval

NAME = "semi_paired"
SEEDS = (5, 6, 7, 8)
#: the decision's words for stats.Decision's verdicts (the claim: semi's targets above the reference's)
WORDS = {"reproduced": "above the reference", "wrong side": "below the reference",
         "null within margin": "level within the margin", "inconclusive": "inconclusive"}


def paired_text(recs: dict, planned: tuple = SEEDS, experiment: str = NAME) -> str:
    """The plan's verdict from finished records (``(arm, seed) -> result``): per-seed differences of the runs'
    pseudo-target precisions, decided only once every ``planned`` seed of both arms has finished; then the
    pooled counts under ``semi_confirm``'s rule and each run, as a description. (``semi_powered`` decides its
    own seeds with this rule.)"""
    from devenus.experiments.mechanism import run_mechanism

    arm, ref = semi_confirm.ARM, pilot.REFERENCE
    seeds = [s for s in planned if (arm, s) in recs and (ref, s) in recs]
    prec = {k: pilot.mechanism_counts(r.get("mechanism") or run_mechanism(r.get("curves") or []),
                                      semi_confirm.PRECISION) for k, r in recs.items() if k[0] in (arm, ref)}
    diffs = [prec[(arm, s)]["value"] - prec[(ref, s)]["value"] for s in seeds]
    lines = [f"{experiment}: {semi_confirm.NAME}'s design on seeds {planned[0]}-{planned[-1]} alone, the run as the unit "
             f"(per seed, {arm}'s pseudo-target precision minus {ref}'s; paired t test and TOST at "
             f"±{pilot.MARGIN}, alpha 0.05).", "",
             "| claim | per seed | mean ± 95% (seeds) | p (difference) | p (TOST) | verdict |",
             "|---|---|---|---|---|---|"]
    per_seed = " / ".join(f"{d:+.3f}" for d in diffs) or "-"
    if seeds != list(planned):
        lines.append(f"| {arm} vs {ref}, + | {per_seed} | - | - | - | not read: {len(seeds)} of {len(planned)} seeds "
                     "finished |")
    else:
        dec = decide(f"{arm} vs {ref}", diffs, side=1, margin=pilot.MARGIN)
        lines.append(f"| {arm} vs {ref}, + | {per_seed} | {mean_interval(diffs).fmt()} ({len(diffs)}) | "
                     f"{dec.p_diff:.4f} | {dec.p_equiv:.4f} | {WORDS[dec.verdict()]} |")
    lines += ["", f"Beside it, a description: the same runs pooled under {semi_confirm.NAME}'s rule and each run.", "",
              semi_confirm.confirm_text({k: r for k, r in recs.items() if k[1] in planned}, planned, experiment)]
    return "\n".join(lines)


DEFINITION = Definition(
    name=NAME,
    summary="semi-supervised (40% labels) TTRL targets vs label-free TTRL's on seeds 5-8, the run as the unit",
    arms=semi_confirm.DEFINITION.arms,
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    train_file=stratified_train_file(pilot.POOL, drawn_for=pilot.NAME),
    report=text_report("verdicts", lambda exp: paired_text(exp.finished())),
)
