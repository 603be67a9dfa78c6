import time

import pytest

from devenus.verify import ExtractConfig, extract_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so the result is \\boxed{42}.", "42"),
        ("first \\boxed{1} then finally \\boxed{7}", "7"),
        ("nested \\boxed{\\frac{1}{\\sqrt{2}}} end", "\\frac{1}{\\sqrt{2}}"),
        ("set \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces do not count
        ("spaced \\boxed {5}", "5"),
        ("bare \\boxed 12 and more", "12"),
        ("\\fbox{x+1}", "x+1"),
        ("answer: $\\boxed{-3}$", "-3"),
        # the last box is unbalanced (cut off): the last balanced one wins
        ("\\boxed{3} but wait \\boxed{\\frac{1}{2}", "3"),
        ("Natalia sold 48/2 = 24 clips.\n#### 72", "72"),
        ("#### 1,000\n", "1,000"),
        ("Thus the answer is 3.5.", "3.5"),
        ("So The Final Answer is: $\\frac{1}{2}$. Done", "\\frac{1}{2}"),
        ("the answer is 4. Let me check: the answer is 5", "5"),
        # priority: boxed beats #### beats "the answer is"
        ("the answer is 1\n#### 2\n\\boxed{3}", "3"),
        ("the answer is 1\n#### 2", "2"),
    ],
)
def test_extract(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "no answer here", "\\boxed{", "\\boxed{}", "\\boxedfoo{3}", "####   \n", "\\boxed{1{2}"],
)
def test_no_answer(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        # an empty final box is no answer: the fallbacks must not return the box itself as the prediction
        ("The answer is \\boxed{}.", None),
        ("Answer: \\boxed{ }", None),
        ("so the answer is \\boxed{} 7", None),
        ("The answer is \\fbox{}", None),
        # ... but a later strategy with a real answer still counts, and so does an earlier non-empty box
        ("The answer is \\boxed{}\n#### 9", "9"),
        ("#### 4\nThe answer is \\boxed{}", "4"),
        ("\\boxed{3} and the answer is \\boxed{}", "3"),
        ("The answer is \\boxedfoo{}", "\\boxedfoo{}"),  # not a box command
    ],
)
def test_an_empty_box_is_no_answer_for_any_strategy(text, expected):
    assert extract_answer(text) == expected


def test_truncated_counts_as_no_answer():
    assert extract_answer("... \\boxed{5}", truncated=True) is None
    assert extract_answer("... \\boxed{5}", truncated=False) == "5"


def test_overlong_answer_is_rejected():
    cfg = ExtractConfig(max_answer_chars=10)
    assert extract_answer("\\boxed{12345678901}", cfg) is None
    assert extract_answer("\\boxed{1234567890}", cfg) == "1234567890"
    # an over-long final box does not fall back to an earlier box
    assert extract_answer("\\boxed{1} \\boxed{" + "9" * 20 + "}", cfg) is None


def test_extra_patterns_and_switches():
    cfg = ExtractConfig(extra_patterns=(r"Choice\s*->\s*([A-E])",))
    assert extract_answer("blah\nChoice -> C", cfg) == "C"
    assert extract_answer("blah\nChoice -> C") is None
    no_box = ExtractConfig(use_boxed=False)
    assert extract_answer("\\boxed{1}\n#### 2", no_box) == "2"
    no_line = ExtractConfig(use_answer_line=False)
    assert extract_answer("blah\nAnswer: 34", no_line) is None
    assert extract_answer("blah\nAnswer: 34", ExtractConfig(extra_patterns=(r"(?i)Answer\s*:\s*(\S+)",), use_answer_line=False)) == "34"


@pytest.mark.parametrize(
    "text, expected",
    [
        # DAPO-Math-17k: "The last line of your response should be of the form Answer: $Answer"
        ("Let me compute. 3 * 4 = 12.\nAnswer: 12", "12"),
        ("work\nAnswer: $\\frac{1}{2}$\n\n", "\\frac{1}{2}"),
        ("work\nanswer: 7.", "7"),
        ("work\n**Answer:** 12", "12"),
        ("work\n**Final Answer:** 1,000", "1,000"),
        ("work\n## Answer: 9", "9"),
        ("work\r\nAnswer: 5\r\n", "5"),
        ("Answer: 7", "7"),
        ("work\nAnswer: (C)", "(C)"),
        # its place in the order: a statement like a box or ####, the later one wins; "the answer is"
        # is read only without one
        ("\\boxed{3}\nAnswer: 4", "4"),
        ("#### 7\nAnswer: 8", "8"),
        ("Answer: 8\n\n\\boxed{3}", "3"),
        ("the answer is 4. Wait, no.\nAnswer: 5", "5"),
    ],
)
def test_answer_line(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Answer: 3\nbut then I kept writing",  # not the last line: a heading, not the final answer
        "work\nAnswer:",  # nothing after it
        "work\nMy answer: 9",  # not a line that starts with Answer
        "work\nThe Answer: key idea is",  # not at the start of the line either
    ],
)
def test_answer_line_only_on_the_last_line(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 150_000,  # thousands of unbalanced boxes
        "\\boxed{" + "{" * 300_000 + "}" * 300_000 + "}",  # deep nesting, over-long
        "word " * 200_000 + "\\boxed{42}",
        "the answer is " * 70_000,
        "{" * 1_000_000,
        "Answer: " + " *" * 500_000,  # one giant last line of markdown noise
        "Answer:" * 300_000,
    ],
)
@pytest.mark.timing  # a wall-clock bound: scripts/test.sh runs it alone (it took 12 s beside two training runs)
def test_megabyte_inputs_are_fast(text):
    """A guard against quadratic scans (minutes on these inputs), not a speed figure: a linear
    pass takes ~0.6 s on a 2-core box."""
    t0 = time.perf_counter()
    extract_answer(text)
    assert time.perf_counter() - t0 < 10.0
