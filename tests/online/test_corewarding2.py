"""Co-rewarding II's logic on hand-built groups: teacher votes label the student, the EMA update and its
schedule, config errors, state (no verl, no model; the worker side runs in test_corewarding2_e2e)."""

import math

import numpy as np
import pytest
import torch

from devenus.online import WeakTrainerInterface
from devenus.signals import cosine_alpha, ema_update_, tensor_checksum
from batches import vote_batch


def cw2(**cfg):
    return WeakTrainerInterface.get("corewarding2").build(cfg)


def groups_with_teacher(groups, n_student=2):
    """``groups``: (labeled, target, student answers + teacher answers); the last rows of each group are the teacher's."""
    vote_only = []
    for _, _, answers, _ in groups:
        vote_only += [False] * n_student + [True] * (len(answers) - n_student)
    return vote_batch(groups, vote_only=vote_only)


def test_registered_with_the_teacher_trainer():
    spec = WeakTrainerInterface.get("corewarding2")
    assert spec.trainer == "devenus.adapters.verl.teacher:EMATeacherTrainer"
    m = spec.build()
    assert m.data_needs == {"unlabeled"} and m.step_needs == {"teacher"}


def test_teacher_majority_labels_the_students_unlabeled_rows_only():
    m = cw2()
    b = groups_with_teacher([
        (False, "", ["9", "9", "4", "4", "5"], {}),  # student says 9 twice; the teacher's majority (4) wins
        (True, "7", ["1", "2", "7", "7", "7"], {}),  # labeled: untouched, however the teacher votes
        (False, "", ["3", None, "3", "3", "2"], {}),
    ])
    new = m.construct_targets(b)
    assert list(new[0:2]) == ["4", "4"] and list(new[5:7]) == [None, None] and list(new[10:12]) == ["3", "3"]
    assert all(t is None for t in new[np.asarray(b.fields["vote_only"])])  # teacher rows never train
    met = m.pop_metrics()
    assert met["voted_groups"] == 2  # the labeled group is not voted on
    # student answers equal to the teacher's majority: group 0 none of 2, group 2 one of 2 (None abstains)
    assert met["student_teacher_agreement"] == pytest.approx(1 / 4)


def test_student_votes_do_not_count_and_ties_or_low_agreement_give_no_target():
    m = cw2()
    new = m.construct_targets(groups_with_teacher([(False, "", ["5", "5", "5", "6", "6", "7"], {})], n_student=2))
    assert list(new[:2]) == ["6", "6"]  # teacher votes 5, 6, 6, 7; with the student's two 5s, 5 would win
    m2 = cw2()
    new2 = m2.construct_targets(groups_with_teacher([(False, "", ["1", "1", "2", "3"], {})]))
    assert list(new2[:2]) == [None, None] and m2.pop_metrics()["tie_share"] == 1.0
    m3 = cw2(min_agreement=0.8)  # the teacher agrees 3 of 4
    new3 = m3.construct_targets(groups_with_teacher([(False, "", ["1", "1", "2", "2", "2", "3"], {})]))
    assert list(new3[:2]) == [None, None] and m3.pop_metrics()["low_agreement_share"] == 1.0


def test_without_teacher_rows_it_says_which_trainer_it_needs():
    with pytest.raises(ValueError, match="EMATeacherTrainer"):
        cw2().construct_targets(vote_batch([(False, "", ["1", "1"], {})]))


def test_ema_update_is_the_convex_combination_and_reports_the_distance():
    g = torch.Generator().manual_seed(0)
    teacher = {"w": torch.randn(3, 4, generator=g), "b": torch.randn(4, generator=g), "step": torch.tensor(3)}
    student = {"w": torch.randn(3, 4, generator=g), "b": torch.randn(4, generator=g), "step": torch.tensor(9)}
    want = {k: 0.9 * teacher[k] + 0.1 * student[k] for k in ("w", "b")}
    sq = ema_update_(teacher, student, 0.1)
    for k in ("w", "b"):
        torch.testing.assert_close(teacher[k], want[k])
    assert int(teacher["step"]) == 3  # integer buffers are not averaged
    assert sq == pytest.approx(sum(float((want[k] - student[k]).pow(2).sum()) for k in ("w", "b")), rel=1e-6)
    assert ema_update_(teacher, student, 1.0) == pytest.approx(0.0)  # alpha 1: the teacher becomes the student
    with pytest.raises(KeyError):
        ema_update_({"w": torch.zeros(1)}, {"v": torch.zeros(1)}, 0.5)
    with pytest.raises(ValueError, match="shape"):
        ema_update_({"w": torch.zeros(2)}, {"w": torch.zeros(3)}, 0.5)


def test_alpha_anneals_from_start_to_end_by_cosine():
    a = [cosine_alpha(u, 5, 0.01, 1e-5) for u in range(1, 8)]
    assert a[0] == 0.01 and a[4:] == [1e-5] * 3
    assert all(x > y for x, y in zip(a[:5], a[1:5]))
    assert a[2] == pytest.approx(1e-5 + (0.01 - 1e-5) * 0.5)  # halfway in steps = halfway in value
    m = cw2(alpha_start=0.02, alpha_end=0.001, anneal_steps=3)
    got = []
    for _ in range(4):
        alpha = m.teacher_alpha(total_steps=100)  # anneal_steps wins over the run's length
        m.teacher_updated(alpha, distance=0.0)
        got.append(alpha)
    assert got == [0.02, pytest.approx(0.0105), 0.001, 0.001]
    assert m.pop_metrics()["teacher_updates"] == 4


def test_state_round_trip_and_teacher_votes():
    m = cw2(teacher_votes=6)
    m.teacher_updated(0.01, 0.5)
    m2 = cw2()
    m2.load_state_dict(m.state_dict())
    assert m2.teacher_update_count() == 1 and m2.teacher_alpha(10) == m.teacher_alpha(10)
    assert m.teacher_rollouts(4) == 6 and cw2().teacher_rollouts(4) == 4


@pytest.mark.parametrize("cfg, message", [
    ({"teacher_votes": -1}, "teacher_votes"),
    ({"min_agreement": 1.5}, "min_agreement"),
    ({"alpha_start": 0.001, "alpha_end": 0.01}, "anneals downwards"),
    ({"alpha_start": 2.0}, "alpha_start"),
    ({"anneal_steps": -3}, "anneal_steps"),
    ({"alpha": 0.1}, "unknown config key"),
])
def test_config_errors_name_the_key(cfg, message):
    with pytest.raises(ValueError, match=message):
        cw2(**cfg)


def test_checksum_is_order_free_and_sees_a_change():
    a, b = torch.ones(3), torch.full((2,), -2.0)
    assert tensor_checksum([a, b]) == tensor_checksum([b, a]) == 7.0
    assert not math.isclose(tensor_checksum([a, b * 1.001]), 7.0)
