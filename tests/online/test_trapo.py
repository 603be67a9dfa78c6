"""TraPO's decisions on hand-built trajectories, against an independent computation (cosine of z-scored
prefixes = Pearson correlation, numpy.corrcoef), with the constant-trajectory, empty-reference, top-k
floor and warm-up cases, and through the step rules (whole groups admitted)."""

from __future__ import annotations


import numpy as np
import pytest

from refine_batches import answers, exact_grade, step_batch

from devenus.online.refine.trapo import TraPO, TraPOConfig, admit_scored, trajectory_score, znorm
from devenus.online.step import StepRules


def reference_score(cand, refs):
    """Mean Pearson correlation of the common first-L prefix (a constant side correlates 0)."""
    refs = [r for r in refs if len(r) >= 2]
    L = min(len(cand), min(len(r) for r in refs))
    out = []
    for r in refs:
        a, b = np.asarray(cand[:L], float), np.asarray(r[:L], float)
        out.append(0.0 if a.std() == 0 or b.std() == 0 else np.corrcoef(a, b)[0, 1])
    return float(np.mean(out))


def test_score_is_the_mean_correlation_of_the_common_prefix():
    rng = np.random.default_rng(0)
    for _ in range(50):
        cand = list(rng.random(rng.integers(2, 12)))
        refs = [list(rng.random(rng.integers(2, 12))) for _ in range(rng.integers(1, 6))]
        assert trajectory_score(cand, refs) == pytest.approx(reference_score(cand, refs), abs=1e-12)


def test_constant_trajectory_scores_zero_and_is_admitted_only_through_top_k():
    assert (znorm([0.5, 0.5, 0.5]) == 0).all()
    refs = [[0.1, 0.4, 0.8, 0.9], [0.2, 0.3, 0.7, 1.0]]
    assert trajectory_score([0.75, 0.75, 0.75, 0.75], refs) == 0.0
    assert trajectory_score([0.1, 0.5, 0.6, 0.9], [[0.3, 0.3, 0.3, 0.3]]) == 0.0  # a constant reference, too
    # the only scored sample: admitted by the "at least 1" quota despite score 0 < 0.4
    assert admit_scored([0.0], 0.4, 0.1) == [True]
    assert admit_scored([0.9, 0.0], 0.4, 0.1) == [True, False]


def test_unscorable_inputs_give_none_never_nan():
    assert trajectory_score([0.1, 0.2, 0.3], []) is None  # empty reference set
    assert trajectory_score([0.1, 0.2, 0.3], [[0.5]]) is None  # one-point references only
    assert trajectory_score([0.1], [[0.1, 0.2]]) is None
    assert admit_scored([None, None], 0.4, 0.1) == [False, False]


def test_top_k_uses_floor_with_at_least_one_and_batch_order_breaks_ties():
    for n, k in ((1, 1), (9, 1), (11, 1), (19, 1), (20, 2), (35, 3)):
        keep = admit_scored([0.0] * n, 0.4, 0.1)
        assert sum(keep) == k and keep[:k] == [True] * k
    keep = admit_scored([0.1, 0.5, 0.3, None, 0.39999999999], 0.4, 0.1)
    assert keep == [False, True, False, False, True]  # >= 0.4 within the comparison tolerance


def drive(m, steps):
    """Run visits; ``steps``: list of group lists for step_batch. Returns the last step's targets and batch."""
    for s, groups in enumerate(steps, 1):
        b = step_batch(groups, s)
        new = m.construct_targets(b)
    return new, b


def test_warmup_then_admission_against_labeled_trajectories_through_the_step():
    cfg = TraPOConfig(warmup=2, min_score=0.4, top_fraction=0.1)  # two warm-up visits: scored on the third
    m = TraPO(cfg)
    rules = StepRules(m, grade=exact_grade)
    # labeled "L" learns (pass rate rising), unlabeled "up" follows it, "down" falls, "flat" is constant
    up, down, flat, lab = [2, 4, 6], [6, 4, 2], [4, 4, 4], [1, 4, 7]
    for s in range(3):
        b = step_batch([("L", True, "5", answers("5", lab[s])), ("up", False, "", answers("7", up[s])),
                        ("down", False, "", answers("8", down[s])), ("flat", False, "", answers("9", flat[s]))], s + 1)
        t = rules.targets(b)
        d = rules.row_surfaces(t.view)
        if s < 2:  # warm-up: only the labeled group trains
            assert list(d.admit) == [True] * 8 + [False] * 24
    # the third visit: scores against the labeled reference
    assert m.trajectories["up"] == [0.25, 0.5, 0.75] and m.trajectories["L"] == [0.125, 0.5, 0.875]
    ev = {e["key"]: e for e in m.pop_evidence() if e["step"] == 3}
    want = {k: reference_score(m.trajectories[k], [m.trajectories["L"]]) for k in ("up", "down", "flat")}
    for k in want:
        assert ev[k]["values"]["score"] == pytest.approx(want[k])
    assert want["up"] > 0.99 and want["down"] < -0.99 and want["flat"] == 0.0
    # up: score >= 0.4 (and the top-1); down and flat: dropped, as whole groups
    assert list(d.admit) == [True] * 16 + [False] * 16
    assert list(t.view.target[8:16]) == ["7"] * 8  # admitted unlabeled rows train against their majority
    assert m.reliable == {"up"}
    metrics = m.pop_metrics()
    assert metrics["admitted_unlabeled"] == 1 and metrics["scored"] == 3


def test_top_k_admission_does_not_make_a_sample_reliable_and_state_round_trips():
    m = TraPO(TraPOConfig(warmup=1, min_score=0.9))
    steps = [[("L", True, "5", answers("5", 2)), ("d", False, "", answers("7", 6))],
             [("L", True, "5", answers("5", 6)), ("d", False, "", answers("7", 2))]]
    new, _ = drive(m, steps)
    assert list(new[8:]) == ["7"] * 8 and m.reliable == set()  # admitted by quota only (score -1)
    m2 = TraPO(TraPOConfig(warmup=1, min_score=0.9))
    m2.load_state_dict(m.state_dict())
    nxt = [("L", True, "5", answers("5", 8)), ("d", False, "", answers("7", 4))]
    a, b = m.construct_targets(step_batch(nxt, 3)), m2.construct_targets(step_batch(nxt, 3))
    assert list(a) == list(b) and m.state_dict() == m2.state_dict()


def test_no_majority_group_is_dropped_even_when_admitted_by_score():
    m = TraPO(TraPOConfig(warmup=1))
    new, _ = drive(m, [[("L", True, "5", answers("5", 2)), ("u", False, "", answers("7", 2))],
                       [("L", True, "5", answers("5", 6)), ("u", False, "", answers("7", 1))]])  # tie: pass rate 0
    assert list(new) == [None] * 16
    assert [e["values"]["admitted"] for e in m.pop_evidence() if e["key"] == "u" and e["step"] == 2] == [False]


def test_default_warmup_scores_on_the_ninth_visit_as_the_reference():
    """The reference scores a sample when its 0-based epoch >= warm_up: with warm_up = 8, on visit 9."""
    m = TraPO()  # warmup=8
    assert m.config.warmup == 8
    scored_at = []
    for s in range(1, 11):
        b = step_batch([("L", True, "5", answers("5", min(8, s))), ("u", False, "", answers("7", min(8, s)))], s)
        m.construct_targets(b)
        if m.pop_metrics()["scored"]:
            scored_at.append(s)
    assert scored_at == [9, 10]


def test_reference_set_is_live_and_excludes_the_candidate_itself():
    """Documented differences (docs/methods/trapo.md): a reliable sample is scored against the others only,
    and every member of the reference set enters with its trajectory as it is now, not a frozen copy."""
    m = TraPO(TraPOConfig(warmup=1, min_score=0.5))
    lab, up, late = [2, 4, 6, 8], [2, 4, 8, 6], [8, 6, 6, 8]
    for s in range(4):
        m.construct_targets(step_batch([("L", True, "5", answers("5", lab[s])), ("up", False, "", answers("7", up[s])),
                                        ("late", False, "", answers("9", late[s]))], s + 1))
        if s == 1:
            assert m.reliable == {"up"}  # scored 1.0 at visit 2, so a reference from visit 3 on
    ev = {e["key"]: e["values"]["score"] for e in m.pop_evidence() if e["step"] == 4}
    t = m.trajectories
    # "up" is reliable but not in its own reference set; "late" is scored against the live 4-point "up"
    assert ev["up"] == pytest.approx(reference_score(t["up"], [t["L"]]))
    assert ev["late"] == pytest.approx(reference_score(t["late"], [t["L"], t["up"]]))
    assert len(t["up"]) == 4


def test_nan_scores_and_points_are_never_admitted():
    assert admit_scored([float("nan")], 0.4, 0.1) == [False]  # not even by the "at least 1" quota
    assert admit_scored([float("nan"), 0.1, 0.0], 0.4, 0.5) == [False, True, False]  # n_scored = 2: k = 1
    assert np.isnan(znorm([0.1, float("nan"), 0.3])).all()
    assert trajectory_score([0.1, float("nan"), 0.3], [[0.1, 0.2, 0.3]]) is None
    assert trajectory_score([0.1, 0.2, 0.3], [[0.1, float("nan"), 0.3]]) is None  # the only reference is NaN
    assert trajectory_score([0.1, 0.2, 0.3], [[0.1, float("nan"), 0.3], [0.1, 0.2, 0.3]]) == pytest.approx(1.0)
    assert znorm([]).size == 0 and trajectory_score([], [[0.1, 0.2]]) is None  # empty: no IndexError


def test_admission_is_exactly_the_groups_s_y_gave_a_target_early_and_late():
    """S_b reads S_y's outcome from the batch (``constructed``); the adapter carries that column to the
    placement after the log-prob pass, where a fresh view is built from it."""
    m = TraPO(TraPOConfig(warmup=1, min_score=0.9))
    rules = StepRules(m, grade=exact_grade)
    for s, (lab, u) in enumerate([(2, 2), (6, 6)], 1):
        t = rules.targets(step_batch([("L", True, "5", answers("5", lab)), ("u", False, "", answers("7", u)),
                                      ("v", False, "", answers("8", 1))], s))
    assert list(t.view.constructed) == [False] * 8 + [True] * 8 + [False] * 8
    assert list(rules.row_surfaces(t.view).admit) == [True] * 16 + [False] * 8
    late = step_batch([("L", True, "5", answers("5", 6)), ("u", False, "", answers("7", 6)),
                       ("v", False, "", answers("8", 1))], 2)
    late.target, late.fields["constructed"] = t.view.target, t.view.constructed  # what the adapter restores
    assert list(m.admit(late)) == [True] * 16 + [False] * 8


def test_the_rank_quota_is_the_floor_of_the_share_at_least_one_and_none_without_scores():
    from devenus.online.refine.trapo import top_k

    assert [top_k(n, 0.1) for n in (0, 1, 9, 10, 14, 20, 29, 30)] == [0, 1, 1, 1, 1, 2, 2, 3]
    assert top_k(7, 0.3) == 2 and top_k(90, 0.7) == 63  # 0.7 x 90 is 62.99999999999999 in floating point
    assert top_k(5, 0.0) == 1 and top_k(5, 1.0) == 5
