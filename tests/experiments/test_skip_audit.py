"""skip_audit: rollout_budget's skip arm with every drawn skip generated, and its verdicts on hand-built
per-step counts whose answer is known."""

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import skip_audit as sa


def test_the_arm_is_rollout_budgets_skip_arm_audited_on_new_pools(monkeypatch):
    from devenus.experiments import pool

    exp, rb = EXPERIMENTS.get("skip_audit"), EXPERIMENTS.get("rollout_budget")
    (arm,) = exp.arms
    skip = next(a for a in rb.arms if a.name == "grpo+skip")
    assert arm.overrides == skip.overrides + ("+devenus.skip.audit_rate=1.0",)
    assert exp.budget == rb.budget and not set(exp.seeds) & set(rb.seeds)
    seen = []
    monkeypatch.setattr(pool, "stratified_pool", lambda name, tb, seed, size: seen.append((name, seed, size)) or ([], {}))
    exp.train_file.draw(type("E", (), {"name": "skip_audit"})(), None, 4)
    assert seen == [("rollout_budget", 4, 128)]


def _step(step, audited, audited_zv, observed, zv):
    p = "devenus/skip/"
    return {"step": step, p + "audited": audited, p + "audited_zero_variance": audited_zv, p + "observed": observed,
            p + "zero_variance_easy": zv - 1, p + "zero_variance_hard": 1}


def test_counts_split_flagged_from_the_rest():
    # step 0 (validation only) is not a training step
    curves = [_step(0, 9, 9, 9, 9), _step(1, 0, 0, 16, 2), _step(2, 3, 2, 16, 4)]
    assert sa.audit_counts(curves) == {"audited": 3, "audited_zv": 2, "other": 29, "other_zv": 4}


def _recs(seeds, per_step):
    return {(sa.ARM, s): {"curves": [_step(i, *per_step) for i in range(1, 33)], "accuracy": {"ID": 0.5}} for s in seeds}


def _verdict_row(text):
    return next(r for r in text.splitlines() if r.startswith(f"| {len(sa.SEEDS)} |") or r.startswith("| 5 |"))


def test_the_verdicts_on_known_counts():
    # 6 runs x 32 steps x 1 flagged: 192 flagged, half with zero variance; 15 unflagged a step, 1 with it
    flags = sa.audit_text(_recs(sa.SEEDS, (1, 0.5, 16, 1.5)))
    row = _verdict_row(flags)
    assert "| 0.500 (96/192) | 0.067 (192/2880) |" in row
    assert "| flags zero-variance groups |" in row and row.endswith(": inconclusive |")
    # the same share flagged and unflagged, many groups: level within the margin, and mostly not zero-variance
    level = _verdict_row(sa.audit_text(_recs(sa.SEEDS, (8, 0.8, 16, 1.6))))
    assert "| no better than unflagged, within the margin |" in level and level.endswith(": mostly not |")
    early = _verdict_row(sa.audit_text(_recs(sa.SEEDS[:5], (1, 0.5, 16, 1.5))))
    assert "not read: 5 of 6 seeds finished" in early
    assert sa.verdicts({"audited": 0, "audited_zv": 0, "other": 5, "other_zv": 1})["verdict"] == "no audits"
