"""Probe passes, verl-free parts: the config and its errors, the probe set, the evidence rows a probe writes."""

from __future__ import annotations

import numpy as np
import pytest

from devenus.config import config_from_dict
from devenus.online.probe import ProbeConfig, ProbeConfigError, chunks, majority_accuracy, probe_evidence, probe_set
from devenus.online.method import OnlineMethod
from devenus.online.refine.trapo2 import TraPO2, TraPO2Config
from refine_batches import answers, step_batch


def test_config_defaults_off_and_due_every_k_steps():
    assert not config_from_dict(ProbeConfig, None).enabled and not config_from_dict(ProbeConfig, {}).due(4)
    c = config_from_dict(ProbeConfig, {"every_k_steps": 2, "pool": "all", "sample_size": 3, "seed": 7, "n": 4})
    assert c == ProbeConfig(2, "all", 3, 7, 4)
    assert [s for s in range(0, 7) if c.due(s)] == [2, 4, 6]
    assert c.rollouts(8) == 4 and ProbeConfig().rollouts(8) == 8


@pytest.mark.parametrize("values, message", [
    ({"every_k": 2}, r"unknown key devenus.probe.every_k \(did you mean devenus.probe.every_k_steps\?\)"),
    ({"pool": "unlabelled"}, "devenus.probe.pool must be one of"),
    ({"every_k_steps": 1.5}, "devenus.probe.every_k_steps must be an integer >= 0, got 1.5"),
    ({"n": True}, "devenus.probe.n must be an integer"),
    ({"sample_size": -1}, r"devenus.probe.sample_size must be an integer >= 0, got -1 \(set it with \+devenus.probe.sample_size="),
    ([1, 2], "must be a mapping"),
])
def test_config_errors_name_the_key(values, message):
    with pytest.raises(ProbeConfigError, match=message):
        config_from_dict(ProbeConfig, values)


def test_probe_set_is_the_pool_or_a_fixed_seeded_sample_of_it():
    labeled = [True, False, False, True, False, False, False, True]
    assert probe_set(labeled, ProbeConfig(1)).tolist() == [1, 2, 4, 5, 6]
    assert probe_set(labeled, ProbeConfig(1, pool="labeled")).tolist() == [0, 3, 7]
    assert probe_set(labeled, ProbeConfig(1, pool="all")).tolist() == list(range(8))
    a = probe_set(labeled, ProbeConfig(1, sample_size=3, seed=1))
    assert len(a) == 3 and set(a) <= {1, 2, 4, 5, 6} and list(a) == sorted(a)
    assert a.tolist() == probe_set(labeled, ProbeConfig(1, sample_size=3, seed=1)).tolist()  # same on every probe
    draws = {tuple(probe_set(labeled, ProbeConfig(1, sample_size=3, seed=s))) for s in range(10)}
    assert len(draws) > 1  # the seed matters
    assert probe_set(labeled, ProbeConfig(1, sample_size=99)).tolist() == [1, 2, 4, 5, 6]
    assert probe_set([True, True], ProbeConfig(1)).tolist() == []
    assert [c.tolist() for c in chunks(np.arange(5), 2)] == [[0, 1], [2, 3], [4]]


def test_a_method_without_evidence_gets_one_generic_row_per_question():
    view = step_batch([("u1", False, "", answers("7", 3, 4)), ("l1", True, "5", ["5", "5", "6", None])], step=4)
    rows = probe_evidence(OnlineMethod(), view)
    assert [(r["key"], r["step"], r["kind"]) for r in rows] == [("u1", 4, "probe"), ("l1", 4, "probe")]
    u, lab = rows
    assert u["majority_answer"] == "7" and u["majority_pass_rate"] == 0.75 and u["target_pass_rate"] is None
    assert lab["majority_answer"] == "5" and lab["majority_pass_rate"] == 0.5 and lab["target_pass_rate"] == 0.5
    assert lab["values"] == {"labeled": True, "rollouts": 4}
    assert majority_accuracy(rows, {"u1": "7", "l1": "6"}) == 0.5
    assert majority_accuracy(rows, {}) is None


def test_probes_are_visits_of_the_method_tagged_probe_and_feed_its_rule():
    # trapo2 with a 2-probe slope: the second probe of a rising majority proposes a promotion
    m = TraPO2(TraPO2Config(min_pass_rate=0.5, min_slope=0.0, slope_probes=2, min_probes=2, window=4))
    first = probe_evidence(m, step_batch([("u1", False, "", answers("7", 2, 4))], step=2))
    assert [(r["kind"], r["step"]) for r in first] == [("probe", 2)]
    assert first[0]["values"]["probes"] == 1  # the method counted the probe as a visit
    second = probe_evidence(m, step_batch([("u1", False, "", answers("7", 4, 4))], step=4))
    assert [r["kind"] for r in second] == ["probe", "proposal"]
    prop = second[1]
    assert prop["values"]["after"] == "7" and prop["values"]["source"] == "probe" and prop["values"]["rule"] == "promote"
    assert m.history.visits["u1"] == 2 and m.pop_evidence() == []
    assert m.pop_metrics()["promotions_proposed"] == 1


def test_evidence_rows_the_method_held_are_kept_unchanged():
    m = TraPO2()
    m.construct_targets(step_batch([("u9", False, "", answers("3", 3, 4))], step=1))  # a training visit, not popped
    rows = probe_evidence(m, step_batch([("u9", False, "", answers("3", 3, 4))], step=2))
    assert [(r["kind"], r["step"]) for r in rows] == [("visit", 1), ("probe", 2)]


def test_a_probe_of_truncated_responses_counts_no_answer():
    view = step_batch([("u1", False, "", ["7", "7", "7", "8"])], step=1)
    view.truncated = np.array([True, True, False, False])
    (row,) = probe_evidence(OnlineMethod(), view)
    assert row["majority_answer"] is None and row["majority_pass_rate"] == 0.0  # 7 vs 8: a tie, no majority


def test_a_probe_reaches_the_method_through_observe_never_construct_targets():
    """The probe's call site is the explicit ``observe`` hook: a refinement method records the visit as S_y
    would; a method that only constructs targets is not asked for them on a probe."""
    from devenus.online.refine.trapo import TraPO, TraPOConfig

    class TargetsOnly(OnlineMethod):
        name = "targets_only"

        def construct_targets(self, batch):
            raise AssertionError("a probe must not call construct_targets")

    assert not OnlineMethod.implements("observe") and OnlineMethod().observe(step_batch([])) is None
    rows = probe_evidence(TargetsOnly(), step_batch([("u1", False, "", answers("7", 3, 4))], step=2))
    assert [r["kind"] for r in rows] == ["probe"]  # the generic row
    m = TraPO(TraPOConfig(warmup=1))
    assert TraPO.implements("observe")
    probe_evidence(m, step_batch([("u1", False, "", answers("7", 3, 4))], step=2))
    assert m.trajectories == {"u1": [0.75]} and m.visits == {"u1": 1}  # the probe is one visit of u1
