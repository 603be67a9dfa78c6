"""Each label-free method's supervision judged against the simulation's truth: the design of
``experiments/plans/mechanism_sweep.md`` (written before any run).

    devenus experiment mechanism_sweep --full        # every arm, seed 0 (the plan's run)
    devenus experiment mechanism_sweep --report      # the tables from the results on disk

- Arms, every label hidden: ``ttrl@0`` (the majority vote of 16 samples, agreement floor 0.5: the reference
  pseudo-target), ``corewarding@0`` (Co-rewarding I: each question beside its paraphrase),
  ``corewarding2@0`` (Co-rewarding II: an EMA teacher's votes, the same floor), ``intuitor@0``
  (self-certainty reward), ``emrl@0`` (token-entropy reward), ``unsupervised@0`` (negative entropy and vote
  agreement). Each method's settings are the weak-supervision experiment's.
- What is read: ``devenus/mechanism/*`` (docs/trainer.md, "Mechanism metrics"): pseudo-target precision and
  coverage for the target methods, the reward's AUROC for "this row's answer is right" for the reward
  methods. These are per-group and per-row statistics over every step; no accuracy claim is made.
- Pool: :data:`POOL` questions stratified on the base pass rate (:mod:`devenus.experiments.pool`: pass rates
  spread around 0.5, none at 0 or 1), 16 steps x 16 prompts x 8 rollouts: 256 groups a run.
- Held-out: 512 ID, 256 near-OOD, 256 far-OOD questions, T=1, 4 samples each (reported, not claimed).
"""

from __future__ import annotations

from pathlib import Path

from devenus.experiments.definition import Budget, Definition, text_report
from devenus.experiments.definitions.weak_supervision import LABEL_FREE
from devenus.experiments.pool import stratified_train_file
from devenus.experiments.runner import Arm, Experiment

NAME = "mechanism_sweep"
POOL = 512
#: method -> settings: the weak-supervision experiment's, chosen there on training-side pseudo-label accuracy,
#: never on held-out splits
METHODS = LABEL_FREE

#: the reference pseudo-target (the plan: every target method is compared with TTRL's majority vote)
REFERENCE = "ttrl@0"
#: pre-registered margins: a precision difference inside ±PRECISION_MARGIN is "level with TTRL"; an AUROC
#: interval inside 0.5 ± AUROC_MARGIN is "at chance"
PRECISION_MARGIN = 0.05
AUROC_MARGIN = 0.05
TARGET_PRECISION = "devenus/mechanism/pseudo_target/precision"
TARGET_COVERAGE = "devenus/mechanism/pseudo_target/coverage"

_pool = stratified_train_file(POOL)


def train_file(arm: Arm, seed: int, exp: Experiment) -> Path:
    """The seed's stratified pool with every label hidden; for Co-rewarding I each question followed by its
    paraphrase (the testbed's ``train_paraphrase`` view of the same question, hidden the same way)."""
    path = _pool(arm, seed, exp)
    if arm.method != "corewarding":
        return path
    pairs = path.with_name(f"pairs_{path.name}")
    if not pairs.exists():
        from devenus.records import read_records, write_records
        from devenus.records.pairs import pair_with_rewrites
        from devenus.testbed import build_testbed

        write_records(pair_with_rewrites(read_records(path), read_records(build_testbed().split("train_paraphrase"))),
                      pairs)
    return pairs


def target_verdict(arm: dict, ref: dict) -> tuple[float, float, float, str]:
    """A target method's pseudo-target precision against the reference's (``{"num", "den"}`` pooled counts):
    the difference, its 95% Wald interval (independent groups), and the verdict at ±:data:`PRECISION_MARGIN`."""
    from devenus.experiments.stats import proportion_difference

    d, lo, hi = proportion_difference(arm["num"], arm["den"], ref["num"], ref["den"])
    verdict = ("level within the margin" if -PRECISION_MARGIN < lo and hi < PRECISION_MARGIN else
               "above the reference" if lo > 0 else "below the reference" if hi < 0 else "inconclusive")
    return d, lo, hi, verdict


def auroc_verdict(series: list[float]) -> tuple[float, float, str]:
    """A reward method's per-step AUROCs (right vs wrong rows within a step): mean, 95% t half-width over the
    steps, and the verdict (chance within 0.5 ± :data:`AUROC_MARGIN`)."""
    from devenus.experiments.stats import mean_interval

    iv = mean_interval(series)
    lo, hi = iv.mean - iv.half_width, iv.mean + iv.half_width
    verdict = ("at chance within the margin" if 0.5 - AUROC_MARGIN < lo and hi < 0.5 + AUROC_MARGIN else
               "ranks right answers higher" if lo > 0.5 else "ranks right answers lower" if hi < 0.5 else
               "inconclusive")
    return iv.mean, iv.half_width, verdict


def report_text(recs: dict) -> str:
    """The plan's verdict table from finished records (``(arm, seed) -> result``)."""
    from devenus.experiments.mechanism import AUROC, run_mechanism
    from devenus.experiments.stats import wilson_interval

    mech = {k: r.get("mechanism") or run_mechanism(r.get("curves") or []) for k, r in recs.items()}
    lines = [f"{NAME}: each method's supervision against the simulation's truth, pooled over the run's steps "
             f"(one run per arm and seed). Targets: precision with its Wilson 95% interval, against {REFERENCE}'s "
             f"(difference, Wald 95%, margin ±{PRECISION_MARGIN}); rewards: AUROC for 'this row is right' within "
             f"each step, mean over steps ± 95% t (chance: 0.5 ± {AUROC_MARGIN}).", "",
             "| arm | seed | metric | value (pooled counts) | 95% interval | vs reference / chance | verdict |",
             "|---|---|---|---|---|---|---|"]
    for (name, seed), m in sorted(mech.items()):
        if TARGET_PRECISION in m:
            t, c = m[TARGET_PRECISION], m.get(TARGET_COVERAGE)
            lo, hi = wilson_interval(t["num"], t["den"])
            ref = mech.get((REFERENCE, seed), {}).get(TARGET_PRECISION)
            if name == REFERENCE or ref is None:
                versus, verdict = "-", "the reference" if name == REFERENCE else "no reference run"
            else:
                d, dlo, dhi, verdict = target_verdict(t, ref)
                versus = f"{d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
            cov = "" if c is None else f"; coverage {c['value']:.3f} ({c['num']:g}/{c['den']:g})"
            lines.append(f"| {name} | {seed} | pseudo-target precision{cov} | {t['value']:.3f} ({t['num']:g}/{t['den']:g}) "
                         f"| [{lo:.3f}, {hi:.3f}] | {versus} | {verdict} |")
        elif AUROC in m:
            a = m[AUROC]
            mean, half, verdict = auroc_verdict([v for _, v in a["series"]])
            lines.append(f"| {name} | {seed} | reward AUROC ({len(a['series'])} steps) | {a['value']:.3f} pooled | "
                         f"{mean:.3f} ± {half:.3f} | {mean - 0.5:+.3f} vs 0.5 | {verdict} |")
        elif name != "base":
            lines.append(f"| {name} | {seed} | none logged | - | - | - | - |")
    return "\n".join(lines) + "\n"



DEFINITION = Definition(
    name=NAME,
    summary="each label-free method's pseudo-target precision or reward AUROC against the truth, 512-question stratified pool",
    arms=tuple(Arm(f"{m}@0", m, 0.0, cfg) for m, cfg in METHODS.items()),
    budget=Budget(steps=16, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5),
    seeds=(0,),
    train_file=train_file,
    report=text_report("verdicts", lambda exp: report_text(exp.finished())),
)
