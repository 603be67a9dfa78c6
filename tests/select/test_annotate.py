"""Annotation sources: a file of answers, a Python callable, the simulation truth; and their errors."""

import json

import pytest

from devenus.select.annotate import annotation_source


def row(k, hidden="7"):
    return {"prompt": [{"role": "user", "content": "q"}], "extra_info": {"index": k},
            "simulation": {"hidden_answer": hidden, "noise": "none"} if hidden else None}


def answers_for_callable(rows):
    assert all("simulation" not in r for r in rows)  # a callable never sees simulation truth
    return [r["extra_info"]["index"].upper() for r in rows]


def test_simulation():
    assert annotation_source("simulation")([row("a", "3"), row("b", "4")]) == ["3", "4"]
    with pytest.raises(ValueError, match="'b' has no simulation.hidden_answer"):
        annotation_source("simulation")([row("a"), row("b", None)])


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_file(tmp_path, suffix):
    p = tmp_path / f"answers{suffix}"
    if suffix == ".jsonl":
        p.write_text("\n".join(json.dumps({"index": k, "answer": v}) for k, v in [("a", "1"), ("b", "02")]) + "\n")
    else:
        p.write_text("index,answer\na,1\nb,02\n")
    src = annotation_source(f"file:{p}")
    assert src([row("b"), row("a")]) == ["02", "1"]
    with pytest.raises(ValueError, match="no answer for question 'c'"):
        src([row("c")])


def test_callable():
    assert annotation_source(f"callable:{__name__}:answers_for_callable")([row("x")]) == ["X"]


def test_bad_specs(tmp_path):
    with pytest.raises(ValueError, match="unknown annotation source"):
        annotation_source("oracle")
    with pytest.raises(FileNotFoundError):
        annotation_source(f"file:{tmp_path / 'none.jsonl'}")
    (tmp_path / "dup.csv").write_text("index,answer\na,1\na,2\n")
    with pytest.raises(ValueError, match="row 1: duplicate index 'a'"):
        annotation_source(f"file:{tmp_path / 'dup.csv'}")
