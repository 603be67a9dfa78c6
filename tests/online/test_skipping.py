"""Skipping before rollout (GRESO's rule), on hand-built histories: who may be skipped, with what probability,
how the exploration probabilities adapt, determinism and the state round trip, histories from evidence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from devenus.config import config_from_dict
from devenus.online.sampling.skipping import (SkipConfig, SkipConfigError, SkipRule, _draw, history_from_evidence,
                                     visit_outcome)
from devenus.records.evidence import EvidenceError, EvidenceWriter, read_evidence


def rule(**kw) -> SkipRule:
    """The rule without its audit unless asked (the audit has tests of its own, below)."""
    return SkipRule(config_from_dict(SkipConfig, {"audit_rate": 0.0, **kw}), seed=3)


def streak(r: SkipRule, key: str, kind: str, n: int, step: int = 0) -> None:
    """n zero-variance visits of one kind (easy: all right, hard: all wrong)."""
    for i in range(n):
        r.observe([key], np.array([True]), np.array([1.0 if kind == "easy" else 0.0]), step + i)


def test_never_skips_a_prompt_without_zero_variance_history():
    r = rule()
    fresh = [f"q{i}" for i in range(200)]
    r.observe(["mixed"], np.array([False]), np.array([0.5]), 0)  # a group with variance
    streak(r, "ended", "easy", 3)
    r.observe(["ended"], np.array([False]), np.array([0.75]), 3)  # variance ends the streak
    streak(r, "easy", "easy", 4)  # one skippable prompt, so a call is not all-skipped
    for step in range(5, 30):
        skip = r.decide(fresh + ["mixed", "ended"], step)
        assert not skip.any()
    assert r.skip_probability("mixed") == r.skip_probability("ended") == r.skip_probability("q0") == 0.0


def test_skip_probability_is_greso_and_draws_decide_it():
    r = rule(p_easy=0.5, p_hard=0.8, min_p=0.05, min_explore=0.01)
    streak(r, "e1", "easy", 1)
    streak(r, "e3", "easy", 3)
    streak(r, "h2", "hard", 2)
    streak(r, "e9", "easy", 9)
    assert r.skip_probability("e1") == pytest.approx(0.5)
    assert r.skip_probability("e3") == pytest.approx(1 - 0.5 ** 3)
    assert r.skip_probability("h2") == pytest.approx(1 - 0.8 ** 2)
    assert r.skip_probability("e9") == pytest.approx(0.99)  # exploration floor: 0.5**9 < 0.01
    streak(r, "e1", "hard", 1, step=10)  # a change of kind restarts the streak
    assert r.history["e1"] == ["hard", 1] and r.skip_probability("e1") == pytest.approx(0.2)
    # the decision is draw < P(skip), the draw fixed by (seeds, step, key)
    keys = ["e3", "h2", "e9"]
    for step in range(20, 40):
        want = [_draw(r.seed, step, k) < r.skip_probability(k) for k in keys]
        if all(want):
            continue  # all-skipped fallback, tested below
        assert r.decide(keys, step).tolist() == want


def test_skip_frequency_matches_the_probability():
    r = rule(step_size=0.0)
    keys = [f"k{i}" for i in range(400)]
    for k in keys:
        streak(r, k, "hard", 2)
    rate = np.mean([r.decide(keys, s).mean() for s in range(100, 110)])
    assert rate == pytest.approx(0.75, abs=0.02)  # 1 - 0.5**2


def test_all_skipped_generates_the_least_likely():
    r = rule()
    streak(r, "a", "easy", 9)
    streak(r, "b", "easy", 2)
    for step in range(50, 60):
        skip = r.decide(["a", "b"], step)
        assert not skip.all()
        if skip[0] != skip[1]:
            continue
        assert skip.tolist() == [True, False]  # b has the lower P(skip)


# ------------------------------------------------------------------ the granule (agent-loop workers)
def near_sure() -> SkipRule:
    """s1, s2: streaks of 1 and 2 (P(skip) 1 - 1e-6 and 1 - 1e-12); s3a, s3b: at the floor (1 - 1e-15, a tie);
    f*: no history (never skipped). Every streak key's draw falls below its P(skip) at step 9 (checked)."""
    r = rule(p_easy=1e-6, min_p=1e-6, min_explore=1e-15)
    for key, n in (("s1", 1), ("s2", 2), ("s3a", 3), ("s3b", 3)):
        streak(r, key, "easy", n)
    assert all(_draw(r.seed, 9, k) < r.skip_probability(k) for k in ("s1", "s2", "s3a", "s3b"))
    r.pop_evidence(), r.pop_metrics()
    return r


@pytest.mark.parametrize("keys, granule, skipped", [
    # granule 1: the draws as they are, only a call that is all skipped generates its least likely prompt
    (["f1", "s3a", "s1", "s2", "s3b"], 1, ["s3a", "s1", "s2", "s3b"]),
    (["s3a", "s1", "s2", "s3b"], 1, ["s3a", "s2", "s3b"]),
    # rounded up to the next multiple, lowest P(skip) generated back first, the first of a tie
    (["f1", "s3a", "s1", "s2", "s3b"], 2, ["s3a", "s2", "s3b"]),
    (["f1", "s3a", "s1", "s2", "s3b"], 4, ["s3b"]),
    (["s3a", "s1", "s2", "s3b"], 2, ["s3a", "s3b"]),  # all skipped: the granule, not one prompt
    (["f1", "f2", "s1", "s2"], 2, ["s1", "s2"]),  # already a multiple: nothing generated back
    # a call whose prompt count is not a multiple: rounded up where a multiple fits (5 prompts, 4 kept) ...
    (["f1", "f2", "f3", "s1", "s2"], 4, ["s2"]),
    # ... and generated whole where none does (the next multiple of 3 above 4 kept is 6 > 5; 4 < 8)
    (["f1", "f2", "f3", "f4", "s1"], 3, []),
    (["s3a", "s1", "s2", "s3b"], 8, []),
])
def test_kept_prompts_are_rounded_up_to_the_granule(keys, granule, skipped):
    r = near_sure()
    skip = r.decide(keys, 9, granule=granule)
    assert [k for k, s in zip(keys, skip) if s] == skipped
    drawn = sum(k.startswith("s") for k in keys)  # every streak key was drawn to be skipped
    m = r.pop_metrics()
    assert m["devenus/skip/skipped"] == len(skipped) and m["devenus/skip/decided"] == len(keys)
    assert m["devenus/skip/kept_for_granule"] == drawn - len(skipped)
    assert m["devenus/skip/skip_rate"] == len(skipped) / len(keys)
    # evidence: a row for each prompt really skipped, none for those generated back
    assert sorted(x["key"] for x in r.pop_evidence() if x["values"]["event"] == "skipped") == sorted(skipped)


def test_granule_one_decides_as_the_draws_and_any_granule_only_generates_back():
    r = rule(p_easy=0.5, p_hard=0.3, step_size=0.0)
    keys = [f"k{i}" for i in range(8)]
    for i, k in enumerate(keys[:6]):
        streak(r, k, "easy" if i % 2 else "hard", 1 + i % 3)  # P(skip) from 0.3 to 0.875, with ties
    probs = np.array([r.skip_probability(k) for k in keys])
    for step in range(20, 120):
        drawn = np.array([_draw(r.seed, step, k) < p for k, p in zip(keys[:6], probs)] + [False, False])
        assert r.decide(keys, step).tolist() == r.decide(keys, step, granule=1).tolist() == drawn.tolist()
        for g in (2, 4):
            skip = r.decide(keys, step, granule=g)
            assert not (skip & ~drawn).any()  # never skips a prompt its draw kept
            kept = int((~skip).sum())
            assert kept % g == 0 and kept - g < max(int((~drawn).sum()), 1)  # the next multiple, no further
            back = drawn & ~skip
            if back.any() and skip.any():  # generated back: the least likely ones
                assert probs[back].max() <= probs[skip].min()
    m = r.pop_metrics()
    assert m["devenus/skip/kept_for_granule"] > 0 and m["devenus/skip/skipped"] > 0


def test_a_granule_below_one_is_an_error():
    with pytest.raises(ValueError, match="granule must be >= 1"):
        rule().decide(["a"], 0, granule=0)


def feed(r: SkipRule, step: int, easy: int, hard: int, mixed: int) -> None:
    """One step: decide over a candidate, then observe groups with the given zero-variance mix."""
    r.decide(["cand", "other"], step)
    keys = [f"s{step}-{i}" for i in range(easy + hard + mixed)]
    zv = np.array([True] * (easy + hard) + [False] * mixed)
    mean = np.array([1.0] * easy + [0.0] * hard + [0.5] * mixed)
    r.observe(keys, zv, mean, step)


def test_exploration_probabilities_move_toward_the_target():
    r = rule(p_easy=0.5, p_hard=0.5, target_zero_variance=0.3, step_size=0.01, min_p=0.05, max_p=0.95)
    streak(r, "cand", "easy", 2)  # a skip candidate every step, so adaptation runs
    # targets: easy 0.1, hard 0.2. Too many easy groups (0.5), too few hard ones (0.1)
    for step in range(10, 20):
        feed(r, step, easy=5, hard=1, mixed=4)
    r.decide([], 20)  # the first call of step 20 adapts on step 19
    assert r.p["easy"] == pytest.approx(0.5 - 10 * 0.01)  # skip easy ones more
    assert r.p["hard"] == pytest.approx(0.5 + 10 * 0.01)  # skip hard ones less
    for step in range(21, 200):
        feed(r, step, easy=5, hard=1, mixed=4)
    assert r.p["easy"] == pytest.approx(0.05) and r.p["hard"] == pytest.approx(0.95)  # bounds
    m = r.pop_metrics()
    assert m["devenus/skip/p_easy"] == pytest.approx(0.05) and m["devenus/skip/p_hard"] == pytest.approx(0.95)


def test_refill_rounds_of_one_step_adapt_once_and_no_candidates_no_adaptation():
    r = rule(target_zero_variance=0.3)
    for round_ in range(3):  # three observe calls of step 5 (first batch and refills): one update
        r.observe([f"x{round_}"], np.array([True]), np.array([1.0]), 5)
    r.decide(["x0"], 6)  # x0 has an easy streak: a candidate at step 6
    assert r.p["easy"] == 0.5  # step 5 had no candidate: nothing to adapt
    r.observe(["y", "z"], np.array([True, True]), np.array([1.0, 1.0]), 6)
    r.observe(["w"], np.array([True]), np.array([1.0]), 6)
    r.decide([], 7)
    assert r.p["easy"] == pytest.approx(0.49)


def test_metrics_and_evidence_rows():
    r = rule(p_easy=0.05, min_p=0.05, min_explore=0.01)
    streak(r, "e", "easy", 5)  # P(skip) = 0.99
    skip = r.decide(["e", "new"], 7)
    m = r.pop_metrics()
    assert m["devenus/skip/decided"] == 2 and m["devenus/skip/candidates"] == 1
    assert m["devenus/skip/skipped"] == m["devenus/skip/skipped_easy"] == float(skip[0])
    assert m["devenus/skip/skip_rate"] == float(skip[0]) / 2 and m["devenus/skip/tracked"] == 1
    rows = r.pop_evidence()
    gen = [x for x in rows if x["values"]["event"] == "generated"]
    assert len(gen) == 5 and gen[-1]["values"] == {"event": "generated", "zero_variance": True, "mean_score": 1.0,
                                                   "class": "easy", "streak": 5, "audited": False}
    if skip[0]:
        (s,) = [x for x in rows if x["values"]["event"] == "skipped"]
        assert s["key"] == "e" and s["step"] == 7 and s["kind"] == "skip"
        assert s["values"]["p_skip"] == pytest.approx(0.99) and s["values"]["streak"] == 5
    assert r.pop_evidence() == [] and r.pop_metrics()["devenus/skip/decided"] == 0


def twins(n: int, kind: str, visits: int, audit_rate: float) -> tuple[list[str], SkipRule, SkipRule]:
    """n keys with the same streak, in a rule without the audit and one with it (same seeds, no adaptation)."""
    keys = [f"k{i}" for i in range(n)]
    plain, audit = rule(step_size=0.0), rule(step_size=0.0, audit_rate=audit_rate)
    for r in (plain, audit):
        for k in keys:
            streak(r, k, kind, visits)
    return keys, plain, audit


def test_the_audit_generates_a_seeded_share_of_the_skips_and_measures_their_precision():
    keys, plain, audit = twins(400, "hard", 2, 0.2)  # P(skip) = 0.75
    would, skip = plain.decide(keys, 100), audit.decide(keys, 100)
    audited = would & ~skip
    assert not (skip & ~would).any()  # the audit only generates prompts the rule would skip
    assert audited.sum() / would.sum() == pytest.approx(0.2, abs=0.05)
    # seeded: the audit draw is its own (same seeds, salted key), fixed by (seeds, step, key)
    want = np.array([w and _draw(audit.seed, 100, f"audit\x1f{k}") < 0.2 for k, w in zip(keys, would)])
    assert audited.tolist() == want.tolist()
    # a restart between the decision and the groups keeps the audit
    restored = rule(step_size=0.0, audit_rate=0.2)
    restored.load_state_dict(json.loads(json.dumps(audit.state_dict())))
    # the generated groups: audited ones zero-variance on every third key; every other generated group
    # zero-variance too, which must not count (only audited skips are judged)
    gen = [k for k, s in zip(keys, skip) if not s]
    zv = np.array([not audited[keys.index(k)] or keys.index(k) % 3 == 0 for k in gen])
    restored.observe(gen, zv, np.where(zv, 0.0, 0.5), 100)
    m = restored.pop_metrics()
    n_audited = int(audited.sum())
    right = sum(1 for i in np.flatnonzero(audited) if i % 3 == 0)
    assert 0 < right < n_audited
    assert (m["devenus/skip/audited"], m["devenus/skip/audited_zero_variance"]) == (n_audited, right)
    assert m["devenus/skip/precision"] == pytest.approx(right / n_audited)
    assert m["devenus/skip/skipped"] == skip.sum()  # audited prompts are not skips
    rows = [x for x in restored.pop_evidence() if x["values"]["event"] == "generated"]
    assert sorted(x["key"] for x in rows if x["values"]["audited"]) == sorted(np.array(keys)[audited])


def test_audited_prompts_count_as_kept_for_the_granule_and_off_means_off():
    keys, plain, audit = twins(40, "easy", 3, 0.3)  # P(skip) = 0.875
    for step in range(10, 20):
        would, skip = plain.decide(keys, step, granule=4), audit.decide(keys, step, granule=4)
        assert (~skip).sum() % 4 == 0 and (~skip).sum() > 0
        # the kept ones: audited + drawn to be generated + the fewest generated back for the granule
        assert (~skip).sum() - (~would).sum() < 4 + (would & ~skip).sum()
    # audit_rate 0: no prompt is audited and no precision is logged (a ratio with no audited group)
    plain.observe(keys, np.ones(40, bool), np.ones(40), 20)
    m = plain.pop_metrics()
    assert m["devenus/skip/audited"] == 0 and "devenus/skip/precision" not in m


def test_an_audit_counts_only_its_own_steps_group():
    r = rule(step_size=0.0, audit_rate=1.0)  # every would-be skip is audited
    streak(r, "e", "easy", 5)
    for step in range(10, 40):
        if not r.decide(["e", "x1", "x2", "x3"], step).any() and "e" in r._audited:
            break
    else:
        pytest.fail("no step drew a skip of 'e'")
    r.pop_metrics()
    r.observe(["e"], np.array([True]), np.array([1.0]), step + 1)  # its group at a later step: not the audit
    assert r.pop_metrics()["devenus/skip/audited"] == 0


def run(r: SkipRule, steps: range, rng_seed: int = 0) -> list[list[bool]]:
    """A run over 12 prompts whose groups come from fixed per-key pass rates (deterministic)."""
    keys = [f"p{i}" for i in range(12)]
    rates = np.linspace(0.0, 1.0, 12)
    out = []
    for step in steps:
        skip = r.decide(keys, step)
        out.append(skip.tolist())
        gen = [k for k, s in zip(keys, skip) if not s]
        rng = np.random.default_rng([rng_seed, step])
        scores = [(rng.random(4) < rates[keys.index(k)]).astype(float) for k in gen]
        r.observe(gen, np.array([s.min() == s.max() for s in scores]), np.array([s.mean() for s in scores]), step)
    return out


def test_restored_rule_decides_like_one_that_never_stopped():
    a = rule()
    first = run(a, range(0, 15))
    state = json.loads(json.dumps(a.state_dict()))  # plain Python types only
    b = rule()
    b.load_state_dict(state)
    assert b.state_dict() == a.state_dict()
    assert run(b, range(15, 40)) == run(a, range(15, 40))
    assert b.state_dict() == a.state_dict() and b.p == a.p
    assert any(any(s) for s in first)  # the run did skip something
    # the same config and seeds decide the same from scratch; another seed differs somewhere
    assert run(rule(), range(0, 15)) == first
    assert run(SkipRule(config_from_dict(SkipConfig, {}), seed=4), range(0, 15)) != first
    with pytest.raises(ValueError, match="skip state: version"):
        b.load_state_dict({**state, "version": 99})


def test_seed_history_from_evidence_written_by_the_evidence_writer(tmp_path):
    folder = tmp_path / "evidence"
    with EvidenceWriter(folder, method="grpo", round=0) as w:
        w.append("easy", 1, "visit", majority_answer="4", majority_pass_rate=1.0, target_pass_rate=1.0)
        w.append("easy", 2, "probe", majority_answer="4", majority_pass_rate=1.0, target_pass_rate=1.0)
        w.append("hard", 1, "visit", majority_answer="5", majority_pass_rate=0.5, target_pass_rate=0.0)
        w.append("mixed", 1, "visit", majority_answer="4", majority_pass_rate=0.75, target_pass_rate=0.75)
        w.append("unlab", 1, "visit", majority_answer="7", majority_pass_rate=1.0)  # unanimous, no target
        w.append("tie", 1, "visit", majority_pass_rate=0.0)  # no unique majority: not zero variance
        w.append("prop", 1, "proposal", values={"rule": "correct"})  # not a visit
        w.append("hard", 2, "skip", values={"event": "skipped", "class": "hard", "streak": 1})  # not a visit
    with EvidenceWriter(folder, method="grpo", round=1) as w:
        # the rule's own record wins over a method's visit row of the same step
        w.append("mixed", 0, "visit", majority_pass_rate=0.5, target_pass_rate=0.5)
        w.append("mixed", 0, "skip", values={"event": "generated", "zero_variance": True, "mean_score": 0.0})
        w.append("easy", 0, "visit", majority_pass_rate=0.75, target_pass_rate=0.75)  # ends easy's streak
    with EvidenceWriter(folder, method="grpo", round=2) as w:
        w.append("hard", 0, "visit", majority_pass_rate=1.0, target_pass_rate=1.0)  # a later round: not earlier

    rows = history_from_evidence(folder, before_round=2)
    assert {r["round"] for r in rows} == {0, 1} and not any(r["kind"] == "proposal" for r in rows)
    r = rule()
    assert r.seed_history(rows) == 8  # easy x3 (r0 visit, r0 probe, r1), hard, mixed x2, unlab, tie
    assert r.history == {"hard": ["hard", 1], "mixed": ["hard", 1], "unlab": ["easy", 1]}
    r0 = rule()
    r0.seed_history(history_from_evidence(folder, rounds=0))
    assert r0.history == {"easy": ["easy", 2], "hard": ["hard", 1], "unlab": ["easy", 1]}
    assert history_from_evidence(read_evidence(folder), rounds=[0]) == history_from_evidence(folder, rounds=0)
    # devenus.skip.history_dirs: several folders at once, rounds in order across them
    later = tmp_path / "r3"
    with EvidenceWriter(later, method="grpo", round=3) as w:
        w.append("unlab", 0, "visit", majority_pass_rate=0.5)  # round 3 ends unlab's streak
    both = rule()
    assert both.seed_from_dirs([later, folder]) == 10
    # round 2's all-correct visit of "hard" follows its round 0 all-wrong one
    assert both.history == {"hard": ["easy", 1], "mixed": ["hard", 1]}
    with pytest.raises(EvidenceError, match="evidence directory not found: .*nowhere"):
        rule().seed_from_dirs([tmp_path / "nowhere"])


def test_the_rules_own_rows_rebuild_its_history(tmp_path):
    a = rule()
    run(a, range(0, 10))
    rows = a.pop_evidence()
    with EvidenceWriter(tmp_path, method="grpo", round=0) as w:
        w.extend(rows)  # the schema accepts them as they are
    b = rule()
    b.seed_history(history_from_evidence(tmp_path))
    assert b.history == a.history and b.history


@pytest.mark.parametrize("row, outcome", [
    ({"kind": "visit", "target_pass_rate": 1.0, "majority_pass_rate": 1.0}, (True, 1.0)),
    ({"kind": "probe", "target_pass_rate": 0.0, "majority_pass_rate": 1.0}, (True, 0.0)),
    ({"kind": "visit", "target_pass_rate": 0.25, "majority_pass_rate": 0.75}, (False, 0.25)),
    ({"kind": "visit", "target_pass_rate": None, "majority_pass_rate": 1.0}, (True, 1.0)),
    ({"kind": "visit", "target_pass_rate": None, "majority_pass_rate": 0.0}, (False, 0.0)),
    ({"kind": "visit", "target_pass_rate": None, "majority_pass_rate": None}, None),
    ({"kind": "trajectory", "target_pass_rate": 1.0}, None),
    ({"kind": "skip", "values": {"event": "skipped"}}, None),
])
def test_which_evidence_rows_are_zero_variance_visits(row, outcome):
    assert visit_outcome(row) == outcome


@pytest.mark.parametrize("values, message", [
    ({"p_easy": 1.0}, r"devenus.skip.p_easy must be a number > 0.0 and < 1.0, got 1.0"),
    ({"p_hard": 0.01}, r"devenus.skip.p_hard must lie in \[devenus.skip.min_p, devenus.skip.max_p\]"),
    ({"min_p": 0.9, "max_p": 0.5}, r"devenus.skip.min_p \(0.9\) must be <= devenus.skip.max_p"),
    ({"target_zero_variance": 2}, r"devenus.skip.target_zero_variance must be a number >= 0.0 and <= 1.0"),
    ({"enable": True}, r"devenus.skip.enable \(did you mean devenus.skip.enabled\?\)"),
    ({"seed": -1}, r"devenus.skip.seed must be an integer >= 0, got -1 \(set it with \+devenus.skip.seed="),
])
def test_config_errors_name_the_key(values, message):
    with pytest.raises(SkipConfigError, match=message):
        config_from_dict(SkipConfig, values)


def test_config_defaults_are_grescos():
    c = config_from_dict(SkipConfig, None)
    assert not c.enabled and c == SkipConfig()
    assert (c.p_easy, c.p_hard, c.target_zero_variance, c.step_size, c.min_p, c.max_p, c.min_explore) == \
        (0.5, 0.5, 0.25, 0.01, 0.05, 0.95, 0.01)
    assert c.audit_rate == 0.05  # not GRESO's: its check of precision, on by default at a small rate
    assert c.targets == pytest.approx({"easy": 0.25 / 3, "hard": 0.25 * 2 / 3})


def test_observe_checks_its_arrays():
    with pytest.raises(ValueError, match="2 keys, 1 zero_variance and 1 mean_score"):
        rule().observe(["a", "b"], np.array([True]), np.array([1.0]), 0)
    with pytest.raises(ValueError, match="mean_score of key 'b' is not a finite number"):
        rule().observe(["a", "b"], np.array([True, True]), np.array([1.0, np.nan]), 0)


def test_a_prompts_decision_does_not_depend_on_its_batch():
    r = rule(step_size=0.0)
    keys = [f"k{i}" for i in range(40)]
    for k in keys:
        streak(r, k, "easy", 1)
    whole = r.decide(keys, 9)
    alone = [bool(r.decide([k, "fresh"], 9)[0]) for k in keys]  # "fresh" keeps a call from being all-skipped
    assert whole.tolist() == alone and 0 < whole.sum() < len(keys)
