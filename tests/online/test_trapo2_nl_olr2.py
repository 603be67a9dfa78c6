"""TraPO v2 and NL-OLR v2: their persistent rules only *propose* (evidence rows of kind ``proposal``);
training never edits a label. Decisions against an independent computation on hand-built visits."""

from __future__ import annotations

from collections import Counter

import numpy as np

from refine_batches import answers, exact_grade, step_batch

from devenus.online.refine.nl_olr2 import NLOLR2, NLOLR2Config
from devenus.online.refine.trapo2 import TraPO2, TraPO2Config
from devenus.online.step import StepRules


def ref_promote(majorities, rates, k=3, min_probes=3, min_rate=0.75, min_slope=0.02):
    last = rates[-k:]
    slope = np.polyfit(np.arange(len(last)), last, 1)[0] if len(last) >= 2 else 0.0
    c = Counter(a for a in majorities if a is not None).most_common()
    mode = c[0][0] if c and (len(c) == 1 or c[0][1] > c[1][1]) else None
    cur = majorities[-1]
    return cur if (cur is not None and len(rates) >= max(k, min_probes) and rates[-1] >= min_rate
                   and slope > min_slope + 1e-12 and mode == cur) else None


def test_trapo2_proposes_promotions_as_the_rule_says_and_trains_labeled_rows_only():
    m = TraPO2()
    rules = StepRules(m, grade=exact_grade)
    seqs = {"rise": [("7", 3), ("7", 4), ("7", 6), ("7", 7), ("7", 7)],
            "flat": [("4", 8)] * 5,  # pass rate 1 but slope 0: never promoted (the rule wants a rising rate)
            "flip": [("5", 6), ("5", 6), ("6", 5), ("6", 6), ("6", 7)]}
    hist = {k: ([], []) for k in seqs}
    made = Counter()
    for s in range(5):
        groups = [("lab", True, "1", answers("1", 4))] + [(k, False, "", answers(*seqs[k][s])) for k in seqs]
        b = step_batch(groups, s + 1)
        t = rules.targets(b)
        assert list(t.view.target) == list(b.target)  # no target is ever constructed
        d = rules.row_surfaces(t.view)
        assert list(d.admit) == [True] * 8 + [False] * 24
        props = {e["key"]: e for e in m.pop_evidence() if e["kind"] == "proposal"}
        for k, (maj, n) in zip(seqs, (seqs[k][s] for k in seqs)):
            hist[k][0].append(maj)
            hist[k][1].append(n / 8)
            want = ref_promote(*hist[k])
            assert (props[k]["values"]["after"] if k in props else None) == want, (s, k)
            if want:
                made[k] += 1
                assert props[k]["values"]["rule"] == "promote" and props[k]["values"]["before"] == ""
    assert "lab" not in m.history.by_key
    assert made == {"rise": 3, "flip": 1}  # flip: "6" became the history's mode at the fifth probe


def ref_correct(visits, k=3, cand_min=0.75, label_max=0.25, margin=0.3):
    """visits: (majority, majority pass rate, label pass rate, label) per visit."""
    maj, mp, lp, label = visits[-1]
    last = visits[-k:]
    if len(last) < k or maj is None or maj == label:
        return None
    ok = mp >= cand_min and lp <= label_max and all(v[0] == maj and v[1] - v[2] >= margin - 1e-12 for v in last)
    return maj if ok else None


def test_nl_olr2_proposes_corrections_with_the_margin_over_the_last_visits_and_keeps_labels():
    m = NLOLR2()
    rules = StepRules(m, grade=exact_grade)
    # (majority answer, its count, label count) per visit, label "9"; the label's count are rollouts answering 9
    plan = {"noisy": [("7", 5, 1), ("7", 6, 1), ("7", 6, 2), ("7", 7, 1), ("7", 7, 0)],
            "close": [("7", 6, 3), ("7", 6, 3), ("7", 5, 2), ("7", 6, 3), ("7", 5, 1)],  # margins >= 0.375, label pass rate 0.375
            "clean": [("9", 7, 7)] * 5}
    seen = {k: [] for k in plan}
    made = Counter()
    for s in range(5):
        groups = []
        for k, p in plan.items():
            maj, n, nl = p[s]
            a = [maj] * n + (["9"] * nl if maj != "9" else [])
            a += [str(2000 + i) for i in range(8 - len(a))]
            groups.append((k, True, "9", a))
        b = step_batch(groups, s + 1)
        t = rules.targets(b)
        assert list(t.view.target) == ["9"] * len(b)  # labels untouched during training
        props = {e["key"]: e for e in m.pop_evidence() if e["kind"] == "proposal"}
        for k, p in plan.items():
            maj, n, nl = p[s]
            seen[k].append((maj, n / 8, (n if maj == "9" else nl) / 8, "9"))
            want = ref_correct(seen[k])
            made[k] += want is not None
            assert (props[k]["values"]["after"] if k in props else None) == want, (s, k)
    assert +made == {"noisy": 3}
    assert props["noisy"]["values"]["before"] == "9" and len(props["noisy"]["values"]["margins"]) == 3


def test_states_round_trip():
    for cls, groups in ((TraPO2, [("u", False, "", answers("7", 5))]), (NLOLR2, [("l", True, "9", answers("7", 7))])):
        a = cls()
        for s in range(1, 4):
            a.construct_targets(step_batch(groups, s))
        b = cls()
        b.load_state_dict(a.state_dict())
        a.pop_evidence()
        a.construct_targets(step_batch(groups, 4))
        b.construct_targets(step_batch(groups, 4))
        assert a.state_dict() == b.state_dict() and a.pop_evidence() == b.pop_evidence()


def _visits(seq, labeled=False, target=""):
    """Visits from (majority, majority pass rate, target pass rate) tuples, steps 1, 2, ..."""
    from devenus.online.rollouts import Visit

    return [Visit(i + 1, maj, mp, tp, target, labeled) for i, (maj, mp, tp) in enumerate(seq)]


def test_trapo2_does_not_promote_on_one_answered_probe():
    from devenus.online.refine.trapo2 import promotion

    cfg = TraPO2Config()
    # probes without a majority are left out of the mode: '7' is its mode on its own, the rate rises
    one = _visits([(None, 0.0, None), (None, 0.0, None), ("7", 0.875, None)])
    assert promotion(one, cfg)[0] is None
    assert promotion(one, TraPO2Config(min_answered=1))[0] == "7"  # the key is what refuses it
    two = _visits([(None, 0.0, None), ("7", 0.5, None), ("7", 0.875, None)])
    assert promotion(two, cfg)[0] == "7"  # two probes agreeing on '7' are enough by default
    assert promotion(two, TraPO2Config(min_answered=3))[0] is None


def test_trapo2_proposal_records_its_answered_probes():
    m = TraPO2()
    rules = StepRules(m, grade=exact_grade)
    for s, (maj, n) in enumerate([("7", 3), ("7", 5), ("7", 7)]):
        rules.targets(step_batch([("u", False, "", answers(maj, n))], s + 1))
        props = [e for e in m.pop_evidence() if e["kind"] == "proposal"]
    assert [p["values"]["answered"] for p in props] == [3]


def test_nan_and_empty_histories_never_promote_or_correct():
    from devenus.online.refine.nl_olr2 import correction_proposal, correction_refusal
    from devenus.online.refine.trapo2 import promotion, promotion_refusal

    nan = float("nan")
    t, n = TraPO2Config(), NLOLR2Config()
    assert promotion([], t) == (None, 0.0, None) and correction_proposal([], n) == (None, [])
    # a NaN pass rate at the current probe, or one inside the slope's window (the slope is NaN)
    assert promotion(_visits([("7", 0.25, None), ("7", 0.5, None), ("7", nan, None)]), t)[0] is None
    assert promotion(_visits([("7", nan, None), ("7", 0.5, None), ("7", 1.0, None)]), t)[0] is None
    for rate, slope, answered in ((nan, 0.1, 3), (1.0, nan, 3)):
        assert "min_" in promotion_refusal(t, rate, slope, answered)
    ok = [("3", 0.875, 0.0)] * 3
    assert correction_proposal(_visits(ok, True, "9"), n)[0] == "3"
    for bad in ([("3", nan, 0.0)] + ok[1:], ok[:2] + [("3", 0.875, nan)], ok[:2] + [("3", nan, 0.0)]):
        assert correction_proposal(_visits(bad, True, "9"), n)[0] is None, bad
    for cand, label, margins in ((nan, 0.0, [0.5]), (1.0, nan, [0.5]), (1.0, 0.0, [nan]), (1.0, 0.0, [])):
        assert correction_refusal(n, cand, label, margins) is not None
