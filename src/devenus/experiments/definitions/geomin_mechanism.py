"""Does GeoMin's filter admit the unlabeled groups whose pseudo-label is right? Its admitted-vs-rejected
pseudo-label precision on ``ten_percent_labels``' design, pooled over new seeds: the plan
``experiments/plans/geomin_mechanism.md`` (written before any run). The pilot is the one cross-check run
(``ten_percent_labels_xcheck``, seed 0): 0.791 (140/177) vs 0.798 (276/346), [-0.080, +0.067].

    devenus experiment geomin_mechanism --full      # seeds 5-12
    devenus experiment geomin_mechanism --report    # the verdict from the results on disk

Groups GeoMin drops before its mixture can judge them are ``admission/unjudged`` (``admission_judged``), not
rejected; held-out accuracy is reported, not decided.
"""

from __future__ import annotations

import dataclasses

from devenus.experiments.definition import Definition, text_report
from devenus.experiments.definitions import refine_mechanism as rm
from devenus.experiments.definitions.refine_mechanism import ADMITTED, REJECTED
from devenus.experiments.definitions import ten_percent_labels as pilot
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import BASE

NAME = "geomin_mechanism"
ARM = "geomin@10"
SEEDS = tuple(range(5, 13))
#: 40 steps x 16 prompts = 640 visits of 512 questions: 128 visited twice at most, so a cluster-size bound on
#: the design effect is sum(m^2) / sum(m) = (384 + 128 x 4) / 640 = 1.4
DESIGN_EFFECT = 1.4
MARGIN = 0.05


def verdict_text(recs: dict, name: str = NAME, seeds: tuple[int, ...] = SEEDS) -> str:
    """The plan's verdict from finished records (``(arm, seed) -> result``), the runs pooled; not read before
    every planned seed has finished. Then each run's counts, as a description. ``name`` and ``seeds``: a
    replication's (``geomin_confirm``), which decides on its own seeds by the same rule."""
    from devenus.experiments.mechanism import pooled_mechanism, run_mechanism

    mech = {s: r.get("mechanism") or run_mechanism(r.get("curves") or []) for (n, s), r in sorted(recs.items()) if n == ARM}
    cells = rm.admission_cells(pooled_mechanism(mech), DESIGN_EFFECT, MARGIN)
    if sorted(mech) != list(seeds):
        cells = (*cells[:2], "-", f"not read: {len(mech)} of {len(seeds)} seeds finished")
    lines = [f"{name}: GeoMin's admission against the simulation's truth, seeds {seeds[0]}-{seeds[-1]} pooled "
             f"(admitted minus rejected pseudo-label precision, Wald 95% with every variance x {DESIGN_EFFECT}; "
             f"margin ±{MARGIN}).", "",
             "| runs | admitted: right pseudo label | rejected: right pseudo label | difference (95%) | verdict |",
             "|---|---|---|---|---|",
             f"| {len(mech)} | {' | '.join(cells)} |",
             "", "Per run (a description):", "", "| seed | admitted | rejected | held-out ID |", "|---|---|---|---|"]
    for s, m in mech.items():
        lines.append(f"| {s} | {rm.counts_cell(rm.mechanism_counts(m, ADMITTED))} | "
                     f"{rm.counts_cell(rm.mechanism_counts(m, REJECTED))} | {rm.id_cell(recs[(ARM, s)])} |")
    return "\n".join(lines) + "\n"


DEFINITION = Definition(
    name=NAME,
    summary="GeoMin's admitted vs rejected pseudo-label precision, ten_percent_labels' design, seeds 5-12 pooled",
    # the arm as ten_percent_labels runs it, compared with the base model alone (grpo@10 is not run here)
    arms=tuple(dataclasses.replace(a, baseline=BASE) for a in pilot.DEFINITION.arms if a.name == ARM),
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    train_file=stratified_train_file(pilot.POOL, drawn_for=pilot.DEFINITION.name),
    report=text_report("verdicts", lambda exp: verdict_text(exp.finished())),
)
