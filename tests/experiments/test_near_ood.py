"""The near-OOD and ID-extension held-out files: deterministic, disjoint from the testbed, the testbed's
format, and no change to the testbed's own build."""

import random

import pytest

from devenus.testbed import TestbedConfig, tasks
from devenus.testbed.build import question_sets
from devenus.testbed.near_ood import LONG_DIGITS, MIXED_DIGITS, generate


@pytest.fixture(scope="module")
def tb_questions():
    return question_sets(TestbedConfig())


def test_deterministic_and_disjoint_from_every_testbed_question(tb_questions):
    a, b = generate(tb_questions, 0), generate(tb_questions, 0)
    assert [q.key for q in a["near_ood"]] == [q.key for q in b["near_ood"]]
    assert [q.key for q in a["test_id_extra"]] == [q.key for q in b["test_id_extra"]]
    used = {q.key for qs in tb_questions.values() for q in qs}
    keys = [q.key for qs in a.values() for q in qs]
    assert len(keys) == len(set(keys)) and not set(keys) & used


def test_families_share_the_skill_but_not_the_training_distribution(tb_questions):
    qs = generate(tb_questions, 0)
    fams = {}
    for q in qs["near_ood"]:
        fams.setdefault(q.family, []).append(q)
    assert sorted(fams) == ["add_long", "add_mixed"] and all(len(v) == 128 for v in fams.values())
    seen_lengths = {tuple(len(o) for o in q.key[4:].split("+")) for q in tb_questions["train"] + tb_questions["sft"]
                    if q.family == "add"}
    assert all(a == b and a <= 4 for a, b in seen_lengths)  # training/SFT: equal lengths, at most 4 digits
    for q in fams["add_long"]:
        assert tuple(len(o) for o in q.key[4:].split("+")) == (LONG_DIGITS, LONG_DIGITS)
    for q in fams["add_mixed"]:
        x, y = q.key[4:].split("+")
        assert len(x) != len(y) and {len(x), len(y)} <= set(MIXED_DIGITS)
        assert q.answer == str(int(x) + int(y)) and q.solution().endswith("\\boxed{" + q.answer + "}")
    assert {q.difficulty for q in qs["test_id_extra"]} == {3} and len(qs["test_id_extra"]) == 256


def test_same_wording_and_worked_solution_as_the_testbed(tb_questions):
    # each generated question reads (views) and is solved (worked solutions) as the testbed's own `add`
    # question of the same operands, which make_add writes
    qs = generate(tb_questions, 0)
    for q in [*qs["near_ood"][:8], *qs["near_ood"][-8:], *qs["test_id_extra"][:8]]:
        x, y = map(int, q.key[4:].split("+"))
        digits = [len(str(x)), len(str(y))]
        values = iter([x, y])
        ref = tasks.make_add(_Fixed(values), max(digits))
        assert (ref.key, ref.answer, ref.views, ref.solutions) == (q.key, q.answer, q.views, q.solutions)


class _Fixed(random.Random):
    """A generator whose randint returns the given numbers in turn (make_add draws x, then y)."""

    def __init__(self, values):
        super().__init__(0)
        self.values = values

    def randint(self, a, b):
        return next(self.values)
