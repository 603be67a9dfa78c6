"""trapo_confirm: trapo_ten_percent's TraPO arm on new seeds, and its verdict on hand-built records whose answer
is known: the scored steps' counts pooled, variance x 3, no verdict before every planned seed."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import trapo_confirm as tc

ADM, REJ = "devenus/mechanism/admission/admitted_precision", "devenus/mechanism/admission/rejected_precision"


def test_the_replication_is_the_pilots_arm_on_new_seeds():
    pilot, confirm = EXPERIMENTS.get("trapo_ten_percent"), EXPERIMENTS.get("trapo_confirm")
    trapo = next(a for a in pilot.arms if a.name == "trapo@10")
    assert [a.name for a in confirm.arms] == ["trapo@10"]
    assert (confirm.arms[0].method, confirm.arms[0].labeled_fraction, confirm.arms[0].method_config) == (
        trapo.method, trapo.labeled_fraction, trapo.method_config)
    assert confirm.budget == pilot.budget and confirm.train_file is pilot.train_file
    assert confirm.seeds == tuple(range(5, 15)) and not set(confirm.seeds) & set(pilot.seeds)
    # 160 steps over 512 questions, 16 a step: warm-up 64 steps, then 96 steps = 3 scored visits a question
    assert tc.SCORED_VISITS == 3 and (confirm.budget.steps - tc.pilot.WARMUP_STEPS) * 16 == 3 * 512


def _run(adm, rej, warmup=(0, 0)):
    """Curves: one warm-up step (its counts must not be read: TraPO scores nothing then) and one scored step."""
    def step(n, a, r):
        return {"step": n, f"{ADM}": a[0] / a[1], f"{REJ}": r[0] / r[1],
                "devenus/mechanism/admission/admitted_right": a[0], "devenus/mechanism/admission/admitted_labeled": a[1],
                "devenus/mechanism/admission/rejected_right": r[0], "devenus/mechanism/admission/rejected_labeled": r[1]}
    return {"curves": [step(10, (1, 1), (warmup[0], warmup[1] or 1)), step(100, adm, rej)], "accuracy": {"ID": 0.5}}


def _pooled(text):
    return text.splitlines()[4]


def test_the_verdicts_and_no_interim_look():
    # 290 admitted and 1000 rejected a run, as in the pilot: x3 over 10 runs gives a half-width near 0.025
    level = tc.verdict_text({("trapo@10", s): _run((250, 290), (850, 1000), warmup=(0, 500)) for s in tc.SEEDS})
    row = _pooled(level)
    assert row.startswith("| 10 | 0.862 (2500/2900) | 0.850 (8500/10000) | +0.012 [") and row.endswith(
        "| no separation within the margin |"), row
    lo, hi = (float(x) for x in row.split("| +0.012 [")[1].split("]")[0].split(", "))
    assert abs((hi - lo) / 2 - 0.025) < 1e-3  # the plan's power case
    above = _pooled(tc.verdict_text({("trapo@10", s): _run((270, 290), (850, 1000)) for s in tc.SEEDS}))
    assert above.endswith("| admits the better pseudo labels |"), above
    below = _pooled(tc.verdict_text({("trapo@10", s): _run((220, 290), (850, 1000)) for s in tc.SEEDS}))
    assert below.endswith("| admits the worse |"), below
    early = _pooled(tc.verdict_text({("trapo@10", s): _run((250, 290), (850, 1000)) for s in tc.SEEDS[:9]}))
    assert early.endswith("| not read: 9 of 10 seeds finished |"), early


def test_a_run_admits_beyond_the_quota_only_when_min_score_admits_more_than_the_top_k():
    def steps(*scored_admitted):
        return [{"step": 65 + i, "devenus/trapo/scored": n, "devenus/trapo/admitted_unlabeled": a}
                for i, (n, a) in enumerate(scored_admitted)]
    # quota: max(1, floor(0.1 n)) a scored step: 1 (n = 14), 2 (n = 20), 0 (nothing scored)
    assert not tc.admitted_beyond_quota(steps((14, 1), (20, 2), (0, 0)))
    assert not tc.admitted_beyond_quota(steps((14, 0), (20, 2)))  # an admitted group without a majority is dropped
    assert tc.admitted_beyond_quota(steps((14, 1), (20, 3)))
    assert tc.admitted_beyond_quota(steps((14, 2)), top_fraction=0.1)
    assert not tc.admitted_beyond_quota(steps((14, 2)), top_fraction=0.2)
    assert not tc.admitted_beyond_quota([])


def test_the_per_run_table_reads_the_reference_set_each_run_grew():
    recs = {("trapo@10", s): _run((250, 290), (850, 1000)) for s in tc.SEEDS}
    recs[("trapo@10", 5)]["curves"][-1][tc.RELIABLE] = 187.0
    rows = [r for r in tc.verdict_text(recs).splitlines() if r.startswith("| 5 |") or r.startswith("| 6 |")]
    assert rows[0].endswith("| 187 |") and rows[1].endswith("| - |"), rows
