"""trapo_ten_percent: the plan's design (ten_percent_labels' pools, 5 visits a question, TraPO scored from
visit 3), and its report on hand-built records whose answers are known: the admission verdict with the
variance inflated for 5 visits, the claim not read before every planned seed."""

import sys
from pathlib import Path

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import trapo_ten_percent as ttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import power  # noqa: E402


def test_the_definition_is_the_plans():
    d, pred = EXPERIMENTS.get("trapo_ten_percent"), EXPERIMENTS.get("ten_percent_labels")
    arms = {a.name: a for a in d.arms}
    assert sorted(arms) == ["grpo_full", "trapo@10"]
    assert arms["trapo@10"].method == "trapo" and arms["trapo@10"].method_config == {"warmup": 2}
    assert arms["trapo@10"].labeled_fraction == 0.1 and arms["trapo@10"].baseline == "grpo_full"
    assert arms["trapo@10"].claimed_side == 0 and arms["grpo_full"].labeled_fraction == 1.0
    # the predecessor's budget but 4x as long: 5 visits of a 512-question pool, 3 of them scored
    assert d.budget.as_dict() == {**pred.budget.as_dict(), "steps": 160}
    assert d.budget.steps * d.budget.prompts_per_step == ttp.VISITS * ttp.POOL and ttp.VISITS > ttp.WARMUP + 2
    assert d.seeds == (0, 1, 2, 3, 4)
    plan = power.PLANS["trapo_ten_percent"]
    assert plan.confirmatory and plan.seeds == len(d.seeds) and plan.run == d.name and plan.steps == d.budget.steps
    assert plan.run_claims == ttp.CLAIMS


def test_the_pools_are_drawn_as_ten_percent_labels_draws_them(monkeypatch):
    # the train file draws its pool under the predecessor's name, whatever experiment asks for it
    from devenus.experiments import pool

    seen = []
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    exp = type("E", (), {"name": "trapo_ten_percent"})()
    ttp.DEFINITION.train_file.draw(exp, None, 3)
    pool.stratified_train_file(128).draw(exp, None, 1)  # without drawn_for: the asking experiment's own draw
    assert seen == [("ten_percent_labels", 3, 512), ("trapo_ten_percent", 1, 128)]


def _curves(admitted, rejected, warm=(0, 0)):
    """160 steps: the warm-up's 64 log only rejected groups (``warm``: right, with a pseudo label, per step);
    the 96 after it split ``admitted`` and ``rejected`` (totals) evenly."""
    key = "devenus/mechanism/admission/"
    out = []
    for step in range(1, 161):
        if step <= ttp.WARMUP_STEPS:
            out.append({"step": step, f"{key}rejected_right": warm[0], f"{key}rejected_labeled": warm[1]})
        else:
            out.append({"step": step, f"{key}admitted_right": admitted[0] / 96, f"{key}admitted_labeled": admitted[1] / 96,
                        f"{key}rejected_right": rejected[0] / 96, f"{key}rejected_labeled": rejected[1] / 96})
    return out


def _recs(seeds, gap=-0.12, admitted=(450, 500), rejected=(1400, 2000), warm=(0, 0)):
    recs = {}
    for s in seeds:
        wobble = 0.01 * (s % 3 - 1)
        recs[("grpo_full", s)] = {"accuracy": {"ID": 0.6}, "base_model": "w", "curves": []}
        recs[("trapo@10", s)] = {"accuracy": {"ID": 0.6 + gap + wobble}, "base_model": "w",
                                 "curves": _curves(admitted, rejected, warm)}
    return recs


def _row(text, first):
    return next(r for r in text.splitlines() if r.startswith(f"| {first} |"))


def test_the_warm_up_is_where_the_plan_says():
    assert ttp.WARMUP_STEPS == 64  # 2 epochs of 512 questions at 16 a step: visits 3-5 are steps 65-160


def test_the_report_reads_the_mechanism_then_the_claim():
    text = ttp.report_text(_recs(range(5)))
    # pooled 2250/2500 = 0.900 vs 7000/10000 = 0.700: +0.200, well outside 0 even at variance x 5
    pooled = _row(text, "pooled")
    assert "0.900 (2250/2500) | 0.700 (7000/10000) | +0.200 [" in pooled and pooled.endswith("| admits the better pseudo labels |")
    claim = _row(text, "trapo@10 vs grpo_full, =")
    assert "-0.122 ± " in claim and "(5)" in claim and claim.endswith("| wrong side |")


def test_the_warm_ups_unscored_groups_are_not_rejected_ones():
    # admitted and scored-but-rejected groups equally right (0.7); the warm-up's groups, never scored, much
    # worse (0.3): the plan's metric sees no separation, every-group counting would credit admission
    text = ttp.report_text(_recs(range(5), admitted=(7000, 10000), rejected=(7000, 10000), warm=(30, 100)))
    assert _row(text, "pooled").endswith("| no separation within the margin |")
    every = _row(text, "pooled, every unlabeled group (warm-up included: description)")
    assert "0.700 (35000/50000) | 0.544 (44600/82000)" in every and every.endswith("| admits the better pseudo labels |")


def test_the_other_verdicts():
    level = ttp.report_text(_recs(range(5), gap=0.0, admitted=(7000, 10000), rejected=(7000, 10000)))
    assert _row(level, "pooled").endswith("| no separation within the margin |")
    assert _row(level, "trapo@10 vs grpo_full, =").endswith("| reproduced |")  # equal within ±0.03
    few = ttp.report_text(_recs(range(5), admitted=(6, 7), rejected=(68.6, 76.2)))  # refine_mechanism's, per run
    assert _row(few, "pooled").endswith("| inconclusive |")
    worse = ttp.report_text(_recs(range(5), admitted=(1400, 2000), rejected=(450, 500)))
    assert _row(worse, "pooled").endswith("| admits the worse |")


def test_no_verdict_before_every_planned_seed():
    text = ttp.report_text(_recs(range(4)))
    assert _row(text, "trapo@10 vs grpo_full, =").endswith("| not read: 4 of 5 seeds finished |")
