"""The collapse guard's rule on hand-built step sequences, and its trainer hook's file side (no verl run)."""

import json

import numpy as np
import pytest

from devenus.config import ConfigError, config_from_dict
from devenus.online.collapse_guard import CollapseGuard, CollapseGuardConfig, batch_observations, repetition_share


def guard(**kw):
    return CollapseGuard(CollapseGuardConfig(enabled=True, **kw))


def run(g, seq):
    return [g.observe(step, obs) for step, obs in enumerate(seq, start=1)]


HEALTHY = {"response_length": 40.0, "repetition": 0.1, "reward_accuracy": 0.7}


def test_length_collapse_acts_after_patience_and_names_the_onset():
    # steps 1-3 baseline (40 tokens); step 6 and 7 shrink below 0.5 x 40
    seq = [HEALTHY] * 5 + [{**HEALTHY, "response_length": 12.0}] * 3
    d = run(guard(patience=2), seq)
    assert [x.flags for x in d][:5] == [()] * 5
    assert d[5].flags == ("length",) and not d[5].act
    assert d[6].act and d[6].onset == 6 and d[6].step == 7
    assert not d[7].act  # acts once per run
    assert d[6].metrics["devenus/collapse/fired"] == 1.0 and d[6].metrics["devenus/collapse/flag/length"] == 1.0
    assert d[6].metrics["devenus/collapse/response_length_vs_baseline"] == pytest.approx(0.3)


def test_a_dip_shorter_than_patience_resets_the_streak():
    short = {**HEALTHY, "response_length": 12.0}
    d = run(guard(patience=2), [HEALTHY] * 3 + [short, HEALTHY, short, HEALTHY])
    assert not any(x.act for x in d) and [x.streak for x in d] == [0, 0, 0, 1, 0, 1, 0]


def test_urlvr_collapse_step_reward_accuracy_below_one_percent():
    seq = [HEALTHY] * 4 + [{**HEALTHY, "reward_accuracy": 0.0}] * 2
    d = run(guard(patience=2), seq)
    assert d[4].flags == ("reward_accuracy",) and d[5].act and d[5].onset == 5
    # during warm-up nothing is flagged, whatever the accuracy
    d = run(guard(patience=1), [{**HEALTHY, "reward_accuracy": 0.0}] * 3)
    assert not any(x.flags for x in d)


def test_repetition_needs_the_absolute_floor_and_a_rise_over_the_baseline():
    # a task whose answers repeat n-grams anyway (baseline 0.55) is not flagged at 0.6
    d = run(guard(patience=1), [{**HEALTHY, "repetition": 0.55}] * 3 + [{**HEALTHY, "repetition": 0.6}])
    assert not d[-1].flags
    d = run(guard(patience=1), [HEALTHY] * 3 + [{**HEALTHY, "repetition": 0.8}])
    assert d[-1].flags == ("repetition",) and d[-1].act


def test_sharpness_and_duplicates_are_off_by_default_and_work_when_armed():
    sharp = {**HEALTHY, "token_nll": 0.01, "duplicate_share": 1.0}
    seq = [{**HEALTHY, "token_nll": 1.0, "duplicate_share": 0.0}] * 3 + [sharp]
    assert not run(guard(patience=1), seq)[-1].flags
    assert run(guard(patience=1, nll_ratio=0.1, max_duplicate_share=0.9), seq)[-1].flags == ("sharpness", "duplicates")


def test_good_checkpoint_is_the_last_whose_rollouts_were_not_flagged():
    g = guard(patience=2)
    run(g, [HEALTHY] * 7 + [{**HEALTHY, "response_length": 5.0}] * 2)  # onset 8, acts at 9
    assert g.fired_at == 9 and g.fired_onset == 8
    # checkpoint 7 generated step 8's (flagged) rollouts; 6 generated step 7's (fine)
    assert g.good_checkpoint([2, 4, 6, 7, 8]) == 6
    assert g.good_checkpoint([7, 8]) is None


def test_checkpoints_are_held_while_a_streak_runs_and_after_acting_only_for_rollback():
    short = {**HEALTHY, "response_length": 12.0}
    seq = [HEALTHY] * 3 + [short, HEALTHY, short, short, HEALTHY]  # a dip, then a streak that acts at step 7
    for action, expect in (("rollback", [False] * 3 + [True, False, True, True, True]), ("stop", [False] * 8)):
        g = guard(patience=2, action=action)
        held = []
        for step, obs in enumerate(seq, start=1):
            g.observe(step, obs)
            held.append(g.holds_checkpoints)  # asked at the step's save, after the step was observed
        assert held == expect, action


def test_state_round_trip_resumes_the_streak_and_baselines():
    seq = [HEALTHY] * 3 + [{**HEALTHY, "response_length": 5.0}]
    a = guard(patience=2)
    run(a, seq)
    b = guard(patience=2)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    d = b.observe(5, {**HEALTHY, "response_length": 5.0})
    assert d.act and d.onset == 4
    with pytest.raises(ValueError, match="unknown keys"):
        b.load_state_dict({"nope": 1})


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match="devenus.collapse_guard.action"):
        config_from_dict(CollapseGuardConfig, {"action": "pause"})
    with pytest.raises(ConfigError, match="every criterion off"):
        CollapseGuardConfig(enabled=True, min_reward_accuracy=0.0, length_ratio=0.0, max_repetition=1.0)
    assert not CollapseGuardConfig().enabled


def test_batch_observations_from_token_arrays():
    assert repetition_share(np.array([1, 2, 3, 4, 5]), 2) == 0.0
    assert repetition_share(np.array([7, 7, 7, 7, 7, 7]), 2) == pytest.approx(1 - 1 / 5)
    responses = np.array([[1, 2, 3, 0], [1, 2, 3, 0], [4, 4, 4, 4], [5, 6, 0, 0]])
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]], bool)
    uid = np.array(["a", "a", "b", "b"], dtype=object)
    lp = np.log(np.full((4, 4), 0.5))
    obs = batch_observations(responses, mask, uid, log_probs=lp, ngram=2)
    assert obs["response_length"] == pytest.approx(3.0)
    assert obs["duplicate_share"] == pytest.approx(0.5)  # rows 0 and 1 are the same response
    assert obs["token_nll"] == pytest.approx(np.log(2))
    assert obs["repetition"] == pytest.approx((0 + 0 + 2 / 3 + 0) / 4)
    assert batch_observations(responses, mask, uid, rows=np.array([False, False, True, True]))["response_length"] == 3.0


def test_rollback_pointer_and_complete_steps(tmp_path):
    from devenus.adapters.verl.checkpoint import TRACKER_FILE, complete_steps
    from devenus.adapters.verl.collapse import rollback_pointer

    for s in (2, 4, 6):
        (tmp_path / f"global_step_{s}" / "actor").mkdir(parents=True)
        (tmp_path / f"global_step_{s}" / "data.pt").write_bytes(b"d")
    (tmp_path / "global_step_8").mkdir()  # no actor folder: not a checkpoint
    (tmp_path / TRACKER_FILE).write_text("6")
    assert complete_steps(str(tmp_path)) == [2, 4, 6]
    assert "global_step_4" in rollback_pointer(str(tmp_path), 4)
    assert (tmp_path / TRACKER_FILE).read_text() == "4"
    rollback_pointer(str(tmp_path), None)
    assert not (tmp_path / TRACKER_FILE).exists() and (tmp_path / (TRACKER_FILE + ".collapsed")).read_text() == "4"
