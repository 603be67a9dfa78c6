"""A confirmatory replication of ``refine_mechanism``'s inconclusive semi-supervised verdict (TTRL's targets on
the unlabeled rows with 40% of labels in the batch, against label-free TTRL's) on new seeds: the plan
``experiments/plans/semi_confirm.md`` (written before any run). The verdict is read on seeds 1-4 alone, each
arm's four runs pooled, with the pilot's rule.

    devenus experiment semi_confirm --full      # seeds 1-4
    devenus experiment semi_confirm --report    # the table from the results on disk

The design is ``refine_mechanism``'s for these two arms, on the pools it would draw for these seeds.
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, text_report
from devenus.experiments.definitions import refine_mechanism as pilot
from devenus.experiments.pool import stratified_train_file

NAME = "semi_confirm"
ARM = "semi@40"
SEEDS = (1, 2, 3, 4)
PRECISION = "pseudo_target/precision"


def confirm_text(recs: dict, seeds: tuple = SEEDS, experiment: str = NAME) -> str:
    """The plan's verdict from finished records (``(arm, seed) -> result``), each arm's runs pooled; not read
    before every planned seed has finished. Then the per-run counts, as a description. (``semi_paired`` prints
    this rule on its own ``seeds``, as a description.)"""
    from devenus.experiments.mechanism import pooled_mechanism, run_mechanism

    mech = {k: r.get("mechanism") or run_mechanism(r.get("curves") or []) for k, r in recs.items()}
    done = {name: sorted(s for (n, s) in mech if n == name) for name in (pilot.REFERENCE, ARM)}
    ready = all(done[n] == list(seeds) for n in done)

    def pooled(name: str, key: str) -> dict:
        return pilot.mechanism_counts(pooled_mechanism({s: mech[(name, s)] for s in done[name]}), key)

    ref = pooled(pilot.REFERENCE, PRECISION)
    lines = [f"{experiment}: {pilot.NAME}'s semi-supervised verdict on seeds {seeds[0]}-{seeds[-1]} alone, each arm's "
             f"runs pooled ({pilot.NAME}'s rule: pooled pseudo-target precision minus {pilot.REFERENCE}'s, Wald 95% "
             f"with every variance x {pilot.VISITS} for {pilot.VISITS} visits a question, margin ±{pilot.MARGIN}).", "",
             "| arm | runs | pseudo-target precision (pooled) | coverage (pooled) | vs reference (95%) | verdict |",
             "|---|---|---|---|---|---|"]
    for name in (ARM, pilot.REFERENCE):
        t, cov = pooled(name, PRECISION), pooled(name, "pseudo_target/coverage")
        if name == pilot.REFERENCE:
            cell, verdict = "-", "the reference"
        elif not ready:
            cell, verdict = "-", f"not read: {len(done[name])} of {len(seeds)} seeds finished"
        else:
            cell, verdict = pilot.difference_verdict(t, ref, *pilot.VERSUS_REFERENCE)
        lines.append(f"| {name} | {len(done[name])} | {pilot.counts_cell(t)} | {pilot.counts_cell(cov)} | {cell} | {verdict} |")
    lines += ["", "Per run (a description):", "", "| arm | seed | pseudo-target precision | coverage | held-out ID |",
              "|---|---|---|---|---|"]
    for (name, seed), m in sorted(mech.items()):
        if name in done:
            lines.append(f"| {name} | {seed} | {pilot.counts_cell(pilot.mechanism_counts(m, PRECISION))} | "
                         f"{pilot.counts_cell(pilot.mechanism_counts(m, 'pseudo_target/coverage'))} | "
                         f"{pilot.id_cell(recs[(name, seed)])} |")
    return "\n".join(lines) + "\n"


DEFINITION = Definition(
    name=NAME,
    summary="semi-supervised (40% labels) TTRL targets vs label-free TTRL's, replicated on seeds 1-4",
    arms=tuple(a for a in pilot.ARMS if a.name in (pilot.REFERENCE, ARM)),
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    train_file=stratified_train_file(pilot.POOL, drawn_for=pilot.NAME),
    report=text_report("verdicts", lambda exp: confirm_text(exp.finished())),
)
