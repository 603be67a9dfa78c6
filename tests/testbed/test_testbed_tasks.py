import random
import re

import pytest

from devenus.testbed import tasks
from devenus.verify import extract_answer


def _solve(family: str, text: str) -> str:
    """Independent solver from the question text alone (not from the generator's fields)."""
    if family in ("add", "add_long"):
        a, b = map(int, re.findall(r"\d+", text))
        return str(a + b)
    if family == "count":
        m = re.match(r"(?:How many times does (\d) appear in|Count the (\d)s in:) ([\d ]+)", text)
        target = m.group(1) or m.group(2)
        return str(m.group(3).split().count(target))
    if family == "max":
        return str(max(map(int, re.findall(r"\d+", text))))
    raise AssertionError(family)


@pytest.mark.parametrize("family", sorted(tasks.FAMILIES))
def test_answers_right_in_both_views_and_solutions_end_boxed(family):
    diffs = {"add": (1, 2, 3, 4, 5), "add_long": (5,), "count": (3, 6, 9), "max": (2, 4, 6)}[family]
    for q in tasks.generate(family, diffs, 200, seed=7):
        assert set(q.views) == set(tasks.VIEWS)
        for view in tasks.VIEWS:
            assert _solve(family, q.text(view)) == q.answer, (view, q.text(view))
            assert extract_answer(q.solution(view)) == q.answer
            assert q.solution(view).rstrip().endswith("\\boxed{" + q.answer + "}")
        assert q.text("original") != q.text("paraphrase")


def test_add_solution_running_result_matches_sum():
    q = tasks.make_add(random.Random(0), 4)
    lines = q.solution().splitlines()
    assert len(lines) == 5  # four columns, then the boxed answer
    assert lines[-2].split("->")[1] == q.answer


def test_generate_is_deterministic_distinct_and_respects_exclusion():
    a = tasks.generate("add", (2, 3), 100, seed=1)
    b = tasks.generate("add", (2, 3), 100, seed=1)
    assert [q.key for q in a] == [q.key for q in b]
    assert len({q.key for q in a}) == 100
    c = tasks.generate("add", (2, 3), 100, seed=2, exclude={q.key for q in a})
    assert not {q.key for q in a} & {q.key for q in c}
    assert {q.difficulty for q in a} == {2, 3}


def test_generate_errors():
    with pytest.raises(KeyError, match="unknown task family"):
        tasks.generate("nope", (1,), 1, seed=0)
    with pytest.raises(ValueError, match="distinct"):
        tasks.generate("add", (1,), 1000, seed=0)  # only 100 one-digit pairs exist
