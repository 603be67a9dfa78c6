"""``trapo_ten_percent``'s inconclusive admission verdict replicated on new seeds (5-14), decided on those alone
with the design effect bounded by the visits TraPO scores (3, not 5): the plan ``experiments/plans/trapo_confirm.md``
(written before any run).

    devenus experiment trapo_confirm --full      # seeds 5-14, trapo@10 only
    devenus experiment trapo_confirm --report    # the verdict from the results on disk

Admission is decided after the warm-up, on visits 3-5 (steps 65-160 of a 512-question pool, 32 steps an epoch),
so a question gives at most :data:`SCORED_VISITS` scored groups in a run: every variance is multiplied by that.
"""

from __future__ import annotations

from dataclasses import replace

from devenus.experiments.definition import text_report
from devenus.experiments.definitions import refine_mechanism as mechanism_rule
from devenus.experiments.definitions import trapo_ten_percent as pilot

NAME = "trapo_confirm"
ARM = "trapo@10"
SEEDS = tuple(range(5, 15))
SCORED_VISITS = pilot.VISITS - pilot.WARMUP  # 3


def verdict_text(recs: dict) -> str:
    """The plan's verdict from finished records (``(arm, seed) -> result``): the scored steps' counts of every
    run pooled, variance x :data:`SCORED_VISITS`, not read before every planned seed has finished; then, as
    descriptions, the pilot's x5, the run as the unit, the runs split by whether ``min_score`` admitted anything
    beyond the top-k quota (:func:`admitted_beyond_quota`), and each run."""
    from devenus.experiments.mechanism import pooled_mechanism
    from devenus.experiments.stats import mean_interval

    scored = {seed: pilot.scored_mechanism(r.get("curves") or [], pilot.WARMUP_STEPS)
              for (name, seed), r in sorted(recs.items()) if name == ARM}
    pooled = pooled_mechanism(scored)
    ready = sorted(scored) == list(SEEDS)
    lines = [f"{NAME}: TraPO's admission on seeds {SEEDS[0]}-{SEEDS[-1]} alone, among the unlabeled groups it scored "
             f"(steps after {pilot.WARMUP_STEPS}: visits {pilot.WARMUP + 1}-{pilot.VISITS}); each run's counts pooled, "
             f"every variance x {SCORED_VISITS} (a question is scored at most {SCORED_VISITS} times a run); margin "
             f"±{pilot.MECHANISM_MARGIN}.", "",
             "| runs | admitted pseudo-label precision | rejected (scored, not admitted) | admitted minus rejected (95%) | verdict |",
             "|---|---|---|---|---|"]
    cells = mechanism_rule.admission_cells(pooled, SCORED_VISITS, pilot.MECHANISM_MARGIN)
    if not ready:
        cells = (*cells[:3], f"not read: {len(scored)} of {len(SEEDS)} seeds finished")
    lines.append(f"| {len(scored)} | {' | '.join(cells)} |")

    def diff(m: dict) -> float:
        return mechanism_rule.mechanism_counts(m, mechanism_rule.ADMITTED)["value"] - mechanism_rule.mechanism_counts(
            m, mechanism_rule.REJECTED)["value"]

    diffs = [diff(m) for m in scored.values() if mechanism_rule.mechanism_counts(m, mechanism_rule.ADMITTED)["den"]]
    lines += ["", "Descriptions (not the decision):", "",
              f"- the same pooled counts under {pilot.NAME}'s rule (variance x {pilot.VISITS}): "
              f"{' | '.join(mechanism_rule.admission_cells(pooled, pilot.VISITS, pilot.MECHANISM_MARGIN)[2:])}",
              f"- the run as the unit (admitted minus rejected per run, t interval): "
              f"{mean_interval(diffs).fmt() if diffs else '-'} ({len(diffs)} runs)"]
    curves = {seed: recs[(ARM, seed)].get("curves") or [] for seed in scored}
    config = {seed: recs[(ARM, seed)].get("arm", {}).get("method_config", {}) for seed in scored}
    by_quota = {seed: admitted_beyond_quota(c, config[seed].get("top_fraction")) for seed, c in curves.items()}
    for beyond, what in ((False, "no more admitted than the top-k quota (min_score admitted nothing of its own)"),
                         (True, "more admitted than the quota (unlabeled questions reached min_score and joined the "
                                "reference set)")):
        runs = {s: m for s, m in scored.items() if by_quota[s] is beyond}
        if runs:
            lines.append(f"- runs with {what}, pooled (found after the verdict): seeds "
                         f"{', '.join(map(str, runs))}: {pilot.admission_row(pooled_mechanism(runs), SCORED_VISITS)}")
    lines += ["", f"| seed | admitted | rejected | admitted minus rejected (95%, x {SCORED_VISITS}) | verdict | held-out ID | "
              "joined the reference set (unlabeled questions) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {seed} | {pilot.admission_row(m, visits=SCORED_VISITS)} | {mechanism_rule.id_cell(recs[(ARM, seed)])} | "
              f"{_last(curves[seed], RELIABLE)} |" for seed, m in scored.items()]
    return "\n".join(lines) + "\n"


RELIABLE = "devenus/trapo/reliable"  # unlabeled questions that ever scored >= min_score (TraPO's reference set)


def _last(curves: list, key: str) -> str:
    values = [c[key] for c in curves if c.get(key) is not None]
    return f"{values[-1]:.0f}" if values else "-"


def admitted_beyond_quota(curves: list, top_fraction: float | None = None) -> bool:
    """Whether a run admitted more unlabeled groups than TraPO's top-k quota alone would (``trapo.top_k`` of each
    scored step; ``top_fraction`` None: TraPO's default): only then did ``min_score`` admit groups of its own.
    Read from the logged ``devenus/trapo/scored`` and ``admitted_unlabeled`` of each step."""
    from devenus.online.refine.trapo import TraPOConfig, top_k

    fraction = TraPOConfig().top_fraction if top_fraction is None else top_fraction
    quota = sum(top_k(int(c.get("devenus/trapo/scored") or 0), fraction) for c in curves)
    admitted = sum(int(c.get("devenus/trapo/admitted_unlabeled") or 0) for c in curves)
    return admitted > quota


DEFINITION = replace(  # the pilot's budget and training files
    pilot.DEFINITION,
    name=NAME,
    summary="TraPO's admitted vs rejected pseudo-label precision on seeds 5-14 pooled (trapo_ten_percent's arm)",
    # the pilot's arm, compared with the base model (no grpo_full here: the plan makes no accuracy claim)
    arms=tuple(replace(a, baseline="base", claimed_side=1) for a in pilot.DEFINITION.arms if a.name == ARM),
    seeds=SEEDS,
    quick_seeds=SEEDS[:1],
    report=text_report("verdicts", lambda exp: verdict_text(exp.finished())),
)
