import importlib.util
from pathlib import Path

import pytest

from devenus.verify import compute_score, grade

REWARD_PATH = Path(__file__).resolve().parents[2] / "src" / "devenus" / "verify" / "reward.py"


class _Untouchable(dict):
    """extra_info that fails the test if anything reads it (simulation fields must not leak)."""

    def __getitem__(self, k):
        raise AssertionError(f"reward read extra_info[{k!r}]")

    def get(self, *a, **k):
        raise AssertionError("reward read extra_info")


def test_correct_wrong_and_no_answer():
    assert compute_score("math", "so \\boxed{\\frac{1}{2}}", "0.5") == {"score": 1.0, "acc": True, "pred": "\\frac{1}{2}"}
    assert compute_score("math", "so \\boxed{3}", "4") == {"score": 0.0, "acc": False, "pred": "3"}
    assert compute_score("math", "I don't know", "4") == {"score": 0.0, "acc": False, "pred": ""}


def test_value_types_are_simple():
    out = compute_score("math", "#### 7", "7")
    assert type(out["score"]) is float and type(out["acc"]) is bool and type(out["pred"]) is str


def test_empty_target_means_untrusted():
    assert compute_score("math", "\\boxed{5}", "") == {"score": 0.0, "acc": False, "pred": "5"}
    assert grade("\\boxed{5}", "").score == 0.0 and grade("\\boxed{5}", "").pred == "5"


def test_truncated_kwarg():
    assert compute_score("math", "\\boxed{5}", "5", truncated=True)["score"] == 0.0
    assert grade("\\boxed{5}", "5", truncated=True).pred is None


def test_list_ground_truth():
    assert compute_score("math", "\\boxed{6}", ["5", "6"])["score"] == 1.0
    assert compute_score("math", "\\boxed{7}", ["5", "6"])["score"] == 0.0


def test_never_reads_extra_info():
    info = _Untouchable(hidden_answer="5", labeled=False)
    assert compute_score("math", "\\boxed{5}", "", extra_info=info)["score"] == 0.0
    assert compute_score("math", "\\boxed{5}", "6", extra_info=info)["score"] == 0.0


def test_loads_by_file_path_like_verl():
    spec = importlib.util.spec_from_file_location("custom_module", REWARD_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.compute_score("math", "the answer is 12.", "12", {})["acc"] is True


@pytest.mark.parametrize("bad", [None, ""])
def test_empty_solution(bad):
    assert compute_score("math", bad, "1")["pred"] == ""


@pytest.mark.parametrize("truth, score", [
    (7, 1.0), (7.0, 1.0), (b"7", 1.0), (bytearray(b"7"), 1.0), (["8", 7], 1.0),
    ({"answer": "7"}, 0.0), (True, 0.0), ([[7]], 0.0), (float("nan"), 0.0), (object(), 0.0),
])
def test_any_ground_truth_gets_a_score(truth, score):
    # verl calls the reward with whatever a row holds; a value that is not an answer is no target
    np = pytest.importorskip("numpy")
    out = compute_score("math", "so the answer is \\boxed{7}", truth)
    assert out["score"] == score and out["pred"] == "7"
    if isinstance(truth, list):
        return
    column = np.empty(1, dtype=object)  # a Parquet list column as verl hands it over
    column[0] = truth
    assert compute_score("math", "\\boxed{7}", column)["score"] == score


@pytest.mark.parametrize("response, pred", [(b"\\boxed{7}", "7"), (7, ""), (["\\boxed{7}"], ""), ({"a": 1}, "")])
def test_any_response_gets_a_score(response, pred):
    out = compute_score("math", response, "7")
    assert out["pred"] == pred and out["score"] == (1.0 if pred else 0.0)
