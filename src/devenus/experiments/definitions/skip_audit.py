"""Does GRESO's skip rule flag the prompts that would give a zero-variance group? Every prompt the rule
draws to skip is generated anyway (``audit_rate`` 1), so its precision is read on all of its decisions, not
on ``rollout_budget``'s 5% sample (9 audits in 9 runs). The plan ``experiments/plans/skip_audit.md``
(written before any run).

    devenus experiment skip_audit --full      # seeds 3-8
    devenus experiment skip_audit --report    # the verdict from the results on disk

- Arm: ``rollout_budget``'s ``grpo+skip`` (same budget: 4,096 rollouts, validation every 4 steps) with
  ``devenus.skip.audit_rate=1``; nothing is skipped, so the run trains as plain GRPO while the rule decides.
- Pools: the 128-question stratified pools ``rollout_budget`` would draw for seeds 3-8 (it ran 0-2).
- Verdict: the skip precision (audited groups with zero variance / audited groups) against the zero-variance
  share of the groups the rule did not flag, the six runs pooled; margin ±:data:`MARGIN`.
"""

from __future__ import annotations

from devenus.experiments.definition import Definition, text_report
from devenus.experiments.definitions import refine_mechanism as rm
from devenus.experiments.definitions import rollout_budget as rb
from devenus.experiments.definitions.rollout_savings import SKIP, id_validation
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import Arm
from devenus.experiments.stats import wilson_interval

NAME = "skip_audit"
ARM = "grpo+skip+audit"
SEEDS = (3, 4, 5, 6, 7, 8)
#: visits a question gets in a run (4,096 rollouts / 8 = 512 prompt visits over 128 questions): the design
#: effect every interval allows for
VISITS = 4
MARGIN = 0.05
_P = "devenus/skip/"


def audit_counts(curves) -> dict[str, float]:
    """A run's summed skip counts: ``audited`` / ``audited_zv`` (groups the rule drew to skip, and those with
    zero variance) and ``other`` / ``other_zv`` (every other generated group)."""
    s = {k: sum(float(c.get(_P + k) or 0) for c in curves if int(c.get("step", 0)) > 0)
         for k in ("audited", "audited_zero_variance", "observed", "zero_variance_easy", "zero_variance_hard")}
    return {"audited": s["audited"], "audited_zv": s["audited_zero_variance"], "other": s["observed"] - s["audited"],
            "other_zv": s["zero_variance_easy"] + s["zero_variance_hard"] - s["audited_zero_variance"]}


def verdicts(c: dict[str, float]) -> dict[str, object]:
    """The plan's two verdicts on pooled :func:`audit_counts` (the difference's cell and verdict by
    :func:`~devenus.experiments.definitions.refine_mechanism.difference_verdict`)."""
    if not c["audited"] or not c["other"]:
        return {"difference": None, "verdict": "no audits", "precision": None, "majority": "no audits"}
    cell, verdict = rm.difference_verdict({"num": c["audited_zv"], "den": c["audited"]},
                                          {"num": c["other_zv"], "den": c["other"]}, "flags zero-variance groups",
                                          "flags fewer than it leaves", "no better than unflagged, within the margin",
                                          visits=VISITS, margin=MARGIN)
    plo, phi = wilson_interval(c["audited_zv"], c["audited"], design_effect=VISITS)
    majority = "mostly zero-variance" if plo > 0.5 else "mostly not" if phi < 0.5 else "inconclusive"
    return {"difference": cell, "verdict": verdict, "precision": (plo, phi), "majority": majority}


def audit_text(recs: dict) -> str:
    """The verdicts from finished records (``(arm, seed) -> result``), not read before every planned seed has
    finished; then each run's counts, as a description."""
    runs = {s: audit_counts(r.get("curves") or []) for (n, s), r in sorted(recs.items()) if n == ARM}
    pooled = {k: sum(c[k] for c in runs.values()) for k in ("audited", "audited_zv", "other", "other_zv")}
    lines = [f"{NAME}: GRESO's skip rule, every drawn skip generated anyway, seeds {SEEDS[0]}-{SEEDS[-1]} pooled "
             f"(Wald / Wilson 95%, every variance x {VISITS} for {VISITS} visits a question; margin ±{MARGIN}).", "",
             "| runs | skip precision (flagged groups with zero variance) | unflagged groups with zero variance | "
             "difference (95%) | verdict | precision vs 0.5 |", "|---|---|---|---|---|---|"]

    def share(k, n):
        return f"{pooled[k] / pooled[n]:.3f} ({pooled[k]:g}/{pooled[n]:g})" if pooled[n] else "none"

    v = verdicts(pooled)
    if sorted(runs) != list(SEEDS):
        diff, verdict, majority = "-", f"not read: {len(runs)} of {len(SEEDS)} seeds finished", "-"
    elif v["difference"] is None:
        diff, verdict, majority = "-", v["verdict"], v["majority"]
    else:
        plo, phi = v["precision"]
        diff, verdict, majority = v["difference"], v["verdict"], f"[{plo:.3f}, {phi:.3f}]: {v['majority']}"
    lines.append(f"| {len(runs)} | {share('audited_zv', 'audited')} | {share('other_zv', 'other')} | {diff} | {verdict} | "
                 f"{majority} |")
    lines += ["", "Per run (a description):", "", "| seed | flagged (zero variance / audited) | unflagged (zero variance "
              "/ generated) | held-out ID |", "|---|---|---|---|"]
    for s, c in runs.items():
        lines.append(f"| {s} | {c['audited_zv']:g}/{c['audited']:g} | {c['other_zv']:g}/{c['other']:g} | "
                     f"{rm.id_cell(recs[(ARM, s)])} |")
    return "\n".join(lines) + "\n"


DEFINITION = Definition(
    name=NAME,
    summary="GRESO's skip rule audited on every decision: precision vs the unflagged groups' zero-variance share",
    arms=(Arm(ARM, "grpo", 1.0, {}, rb.COMMON + SKIP + ("+devenus.skip.audit_rate=1.0",)),),
    budget=rb.DEFINITION.budget,
    seeds=SEEDS,
    train_file=stratified_train_file(rb.POOL, drawn_for=rb.NAME),
    validation=id_validation,
    report=text_report("verdicts", lambda exp: audit_text(exp.finished())),
)
