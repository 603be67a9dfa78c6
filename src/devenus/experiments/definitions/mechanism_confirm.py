"""A confirmatory replication of ``mechanism_sweep``'s two inconclusive verdicts (Intuitor's reward AUROC,
Co-rewarding II's pseudo-target precision against TTRL's) on new seeds: the plan
``experiments/plans/mechanism_confirm.md`` (written before any run). The verdict is read on seeds 1-4 alone,
the four runs of each arm pooled, with the pilot's rules.

    devenus experiment mechanism_confirm --full      # seeds 1-4
    devenus experiment mechanism_confirm --report    # the tables from the results on disk

The design is ``mechanism_sweep``'s, arm for arm, on the pools it would draw for these seeds.
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, text_report
from devenus.experiments.definitions import mechanism_sweep as pilot
from devenus.experiments.pool import stratified_train_file

NAME = "mechanism_confirm"
ARM_NAMES = ("ttrl@0", "corewarding2@0", "intuitor@0")
SEEDS = (1, 2, 3, 4)


def confirm_text(recs: dict) -> str:
    """The plan's two verdicts from finished records (``(arm, seed) -> result``), each arm's runs pooled; no
    verdict before every planned seed has finished. Then the pilot's per-run table, as a description."""
    from devenus.experiments.mechanism import AUROC, pooled_mechanism, run_mechanism
    from devenus.experiments.stats import mean_interval, wilson_interval

    mech = {k: r.get("mechanism") or run_mechanism(r.get("curves") or []) for k, r in recs.items()}
    done = {name: sorted(s for (n, s) in mech if n == name) for name in ARM_NAMES}
    lines = [f"{NAME}: {pilot.NAME}'s inconclusive verdicts on seeds {SEEDS[0]}-{SEEDS[-1]} alone, each arm's runs "
             f"pooled ({pilot.NAME}'s rules: targets against {pilot.REFERENCE}'s, Wald 95%, margin "
             f"±{pilot.PRECISION_MARGIN}; reward AUROC over every step of the runs, 95% t, chance 0.5 ± "
             f"{pilot.AUROC_MARGIN}).", "",
             "| arm | runs | metric | pooled value | 95% interval | vs reference / chance | verdict |",
             "|---|---|---|---|---|---|---|"]

    def pooled(name: str) -> dict:  # the arm's runs' target counts summed
        return pooled_mechanism({s: mech[(name, s)] for s in done[name]}).get(pilot.TARGET_PRECISION,
                                                                                 {"num": 0, "den": 0})

    ready = all(done[n] == list(SEEDS) for n in ARM_NAMES)
    ref = pooled(pilot.REFERENCE)
    for name in ("corewarding2@0", pilot.REFERENCE):
        t = pooled(name)
        if not t["den"]:
            lines.append(f"| {name} | {len(done[name])} | pseudo-target precision | none | - | - | no targets |")
            continue
        lo, hi = wilson_interval(t["num"], t["den"])
        if name == pilot.REFERENCE:
            versus, verdict = "-", "the reference"
        elif not ready:
            versus, verdict = "-", f"not read: {len(done[name])} of {len(SEEDS)} seeds finished"
        else:
            d, dlo, dhi, verdict = pilot.target_verdict(t, ref)
            versus = f"{d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
        lines.append(f"| {name} | {len(done[name])} | pseudo-target precision | {t['value']:.3f} ({t['num']:g}/{t['den']:g}) "
                     f"| [{lo:.3f}, {hi:.3f}] | {versus} | {verdict} |")
    runs = [[v for _, v in mech[("intuitor@0", s)].get(AUROC, {}).get("series", [])] for s in done["intuitor@0"]]
    series = [v for run in runs for v in run]
    if len(series) >= 2:
        mean, half, verdict = pilot.auroc_verdict(series)
        if not ready:
            verdict = f"not read: {len(runs)} of {len(SEEDS)} seeds finished"
        check = mean_interval([sum(run) / len(run) for run in runs if run])  # the run as the unit: a check
        lines.append(f"| intuitor@0 | {len(runs)} | reward AUROC ({len(series)} steps; per-run means "
                     f"{check.fmt(signed=False)}) | {mean:.3f} (mean of steps) | {mean:.3f} ± {half:.3f} | {mean - 0.5:+.3f} vs 0.5 | "
                     f"{verdict} |")
    else:
        lines.append(f"| intuitor@0 | {len(runs)} | reward AUROC | none | - | - | no steps logged |")
    return "\n".join(lines) + "\n\nPer run (the pilot's table, a description):\n\n" + pilot.report_text(recs)


DEFINITION = Definition(
    name=NAME,
    summary="Intuitor's reward AUROC and Co-rewarding II's targets vs TTRL's, replicated on seeds 1-4",
    arms=tuple(a for a in pilot.DEFINITION.arms if a.name in ARM_NAMES),
    budget=pilot.DEFINITION.budget,
    seeds=SEEDS,
    train_file=stratified_train_file(pilot.POOL, drawn_for=pilot.NAME),
    report=text_report("verdicts", lambda exp: confirm_text(exp.finished())),
)
