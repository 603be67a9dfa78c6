"""The refinement methods' and semi-supervised batches' supervision judged against the simulation's truth:
the design of ``experiments/plans/refine_mechanism.md`` (written before any run).

    devenus experiment refine_mechanism --full        # every arm, seed 0 (the plan's run)
    devenus experiment refine_mechanism --report      # the tables from the results on disk

- Arms: ``ttrl@0`` (every label hidden: the reference majority-vote target), ``semi@40`` (TTRL with 40% of
  labels kept), ``trapo@40`` (admission by trajectory), ``trapo2@40`` (promotion proposals), and
  ``nl_olr2@active0.9`` (correction proposals on ``label_noise_rho``'s seed-0 active rho 0.9 file).
- Pool: :data:`POOL` questions stratified on the base pass rate; 48 steps x 16 prompts = 6 visits a question,
  so TraPO (``warmup`` 2: scored from visit 3) and the proposal rules see the revisits they need.
- Verdicts: each question is visited up to :data:`VISITS` times, so every variance is multiplied by
  :data:`VISITS` (the largest design effect a cluster of that size can have); margin ±:data:`MARGIN`.
"""

from __future__ import annotations

from pathlib import Path

from devenus.experiments.definition import Definition, text_report
from devenus.experiments.definitions import label_noise_rho as noisy
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import Arm, Experiment
from devenus.experiments.stats import proportion_difference, wilson_interval

NAME = "refine_mechanism"
POOL = 128
LABELED = 0.4  # 51 of 128 questions
#: visits per question (48 steps x 16 prompts / 128): the design effect every interval allows for
VISITS = 6
MARGIN = 0.05
TTRL = {"votes": 16, "min_agreement": 0.5}  # mechanism_sweep's (the weak-supervision experiment's)
REFERENCE = "ttrl@0"
#: the verdict words of a comparison with the reference's pseudo-target precision (above, below, level)
VERSUS_REFERENCE = ("above the reference", "below the reference", "level within the margin")
NOISY_ARM = "nl_olr2@active0.9"
ADMITTED, REJECTED = "admission/admitted_precision", "admission/rejected_precision"

ARMS = (
    Arm(REFERENCE, "ttrl", 0.0, TTRL),
    Arm("semi@40", "ttrl", LABELED, TTRL, baseline=REFERENCE),
    Arm("trapo@40", "trapo", LABELED, {"warmup": 2}),
    Arm("trapo2@40", "trapo2", LABELED, {}),
    Arm(NOISY_ARM, "nl_olr2", 1.0, {}),
)

_pool = stratified_train_file(POOL)


def train_file(arm: Arm, seed: int, exp: Experiment) -> Path:
    """The seed's stratified pool with the arm's labels kept; NL-OLR v2 gets label_noise_rho's active rho 0.9
    file of the same seed (the same pool and noise draw)."""
    if arm.name == NOISY_ARM:
        return noisy.train_file(Arm(noisy.arm_name("grpo", "active", 0.9)), seed, exp)
    return _pool(arm, seed, exp)


def difference_verdict(a: dict, b: dict, above: str, below: str, level: str, visits: int = VISITS,
                       margin: float = MARGIN) -> tuple[str, str]:
    """``a`` minus ``b`` (pooled ``{"num", "den"}`` counts, a question counted up to ``visits`` times): the cell
    and the verdict at ±``margin``."""
    if not a["den"] or not b["den"]:
        return "-", "no counts"
    d, lo, hi = proportion_difference(a["num"], a["den"], b["num"], b["den"], design_effect=visits)
    verdict = (above if lo > 0 else below if hi < 0 else level if -margin < lo and hi < margin else "inconclusive")
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]", verdict


def mechanism_counts(m: dict, key: str) -> dict:
    """A run's pooled ``devenus/mechanism/<key>`` counts (none logged: zero counts)."""
    return m.get(f"devenus/mechanism/{key}") or {"num": 0, "den": 0, "value": float("nan")}


def admission_cells(m: dict, visits: float = VISITS, margin: float = MARGIN) -> tuple[str, str, str, str]:
    """A run's (or a pool of runs') admitted and rejected pseudo-label precision (TraPO's, GeoMin's), and admitted
    minus rejected with its verdict at ±``margin``, every variance x ``visits``: four cells."""
    admitted, rejected = mechanism_counts(m, ADMITTED), mechanism_counts(m, REJECTED)
    return (counts_cell(admitted), counts_cell(rejected),
            *difference_verdict(admitted, rejected, "admits the better pseudo labels", "admits the worse",
                                "no separation within the margin", visits, margin))


def counts_cell(c: dict) -> str:
    """``value (num/den)``, or ``none``."""
    return f"{c['value']:.3f} ({c['num']:g}/{c['den']:g})" if c["den"] else "none"


def id_cell(rec: dict) -> str:
    """A result's held-out ID accuracy, or ``-``."""
    acc = (rec.get("accuracy") or {}).get("ID")
    return "-" if acc is None else f"{acc:.3f}"


def report_text(recs: dict, olr_reference: dict | None = None) -> str:
    """The plan's verdict table from finished records (``(arm, seed) -> result``); ``olr_reference``: OLR's
    pooled correction precision on the same noisy file, printed beside NL-OLR v2's (not tested)."""
    from devenus.experiments.mechanism import run_mechanism

    mech = {k: r.get("mechanism") or run_mechanism(r.get("curves") or []) for k, r in recs.items()}
    lines = [f"{NAME}: supervision against the simulation's truth, counts pooled over the run's steps. Every "
             f"interval allows for {VISITS} visits per question (variance x {VISITS}); margin ±{MARGIN}.", "",
             "| arm | seed | metric | value (pooled counts) | compared with | difference or interval (95%) | verdict |",
             "|---|---|---|---|---|---|---|"]
    for (name, seed), m in sorted(mech.items()):
        ref = mechanism_counts(mech.get((REFERENCE, seed), {}), "pseudo_target/precision")
        if name == REFERENCE or name == "semi@40":
            t, cov = mechanism_counts(m, "pseudo_target/precision"), mechanism_counts(m, "pseudo_target/coverage")
            cell, verdict = ("-", "the reference") if name == REFERENCE else difference_verdict(t, ref, *VERSUS_REFERENCE)
            lines.append(f"| {name} | {seed} | pseudo-target precision; coverage {counts_cell(cov)} | {counts_cell(t)} | "
                         f"{'-' if name == REFERENCE else f'{REFERENCE} {counts_cell(ref)}'} | {cell} | {verdict} |")
        elif name == "trapo@40":
            admitted, rejected, cell, verdict = admission_cells(m)
            lines.append(f"| {name} | {seed} | admitted pseudo-label precision | {admitted} | rejected {rejected} | "
                         f"{cell} | {verdict} |")
        elif name == "trapo2@40":
            p, rec = mechanism_counts(m, "promotion/precision"), mechanism_counts(m, "promotion/recall")
            cell, verdict = difference_verdict(p, ref, *VERSUS_REFERENCE)
            lines.append(f"| {name} | {seed} | promotion precision; recall {counts_cell(rec)} | {counts_cell(p)} | "
                         f"{REFERENCE} {counts_cell(ref)} | {cell} | {verdict} |")
        elif name == NOISY_ARM:
            p, rec = mechanism_counts(m, "proposed_correction/precision"), mechanism_counts(m, "proposed_correction/recall")
            if p["den"]:
                lo, hi = wilson_interval(p["num"], p["den"], design_effect=VISITS)
                cell = f"[{lo:.3f}, {hi:.3f}]"
                verdict = "corrections mostly right" if lo > 0.5 else "mostly wrong" if hi < 0.5 else "inconclusive"
            else:
                cell, verdict = "-", "no proposals"
            olr = "-" if not olr_reference else f"OLR (applied, other code) {counts_cell(olr_reference)}"
            lines.append(f"| {name} | {seed} | proposed-correction precision; recall {counts_cell(rec)} | {counts_cell(p)} | "
                         f"{olr} | {cell} | {verdict} |")
    return "\n".join(lines) + "\n"


def _olr_reference(exp: Experiment) -> dict | None:
    """label_noise_rho's olr@active0.9 seed-0 correction precision, from its committed result."""
    import json

    path = exp.results.parent / noisy.NAME / f"{noisy.arm_name('olr', 'active', 0.9)}_s0.json"
    if not path.exists():
        return None
    return (json.loads(path.read_text()).get("mechanism") or {}).get("devenus/mechanism/correction/precision")



DEFINITION = Definition(
    name=NAME,
    summary="TraPO, TraPO v2, NL-OLR v2 and semi-supervised supervision against the truth, 6 visits a question",
    arms=ARMS,
    budget=noisy.DEFINITION.budget,
    seeds=(0,),
    train_file=train_file,
    report=text_report("verdicts", lambda exp: report_text(exp.finished(), _olr_reference(exp))),
)
