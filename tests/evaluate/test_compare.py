"""Reading verl's validation dump back per question, and the paired difference of two evaluations."""

import json

import pytest

from devenus.evaluate.compare import paired_difference, per_question_means, verl_dump_scores
from devenus.records import read_records


def test_verl_dump_scores_keyed_like_our_items(base_testbed, tmp_path):
    rows = read_records(base_testbed.split("test_id"))[:3]
    dump = tmp_path / "0.jsonl"
    lines = []
    for r, scores in zip(rows, ([1.0, 0.0], [0.0, 0.0], [1.0, 1.0])):
        q = r["prompt"][-1]["content"]
        # verl's format: the prompt decoded without special tokens, one line per sample
        lines += [json.dumps({"input": f"user\n{q}\nassistant\n", "output": "x", "gts": "1", "score": s, "step": 0})
                  for s in scores]
    lines.append(json.dumps({"input": "user\nnot a testbed question\nassistant\n", "score": 1.0}))
    dump.write_text("\n".join(lines) + "\n")
    got = verl_dump_scores(dump, [base_testbed.split("test_id")])
    keys = [r["extra_info"]["index"] for r in rows]
    assert got == {keys[0]: [1.0, 0.0], keys[1]: [0.0, 0.0], keys[2]: [1.0, 1.0]}
    assert per_question_means(got) == {keys[0]: 0.5, keys[1]: 0.0, keys[2]: 1.0}

    dump.write_text(json.dumps({"prompt": "p", "reward": 1}) + "\n")
    with pytest.raises(ValueError, match="line 1: expected verl's validation fields"):
        verl_dump_scores(dump, [base_testbed.split("test_id")])


def test_paired_difference_by_hand():
    ours = {"a": 1.0, "b": 0.5, "c": 0.0, "only_ours": 1.0}
    theirs = {"a": 0.5, "b": 0.5, "c": 0.25}
    d = paired_difference(ours, theirs, n_boot=500, seed=0)
    assert d.mean == pytest.approx((0.5 + 0 - 0.25) / 3)
    assert d.lo <= d.mean <= d.hi
    with pytest.raises(ValueError, match="share no question"):
        paired_difference({"x": 1.0}, {"y": 1.0})


def test_the_question_of_a_dump_row_is_its_last_user_turn():
    from devenus.evaluate.compare import last_user_turn, question_of_dump

    # a bare testbed question, and a chat model's system turn + worked turn + question (verl decodes the roles)
    assert question_of_dump("user\n3+4=?\nassistant\n") == "3+4=?"
    row = {"prompt": [{"role": "user", "content": "1+1? Box it."}, {"role": "assistant", "content": "\\boxed{2}"},
                      {"role": "user", "content": "2+5? Box it."}]}
    dumped = "system\nYou are SmolLM\nuser\n1+1? Box it.\nassistant\n\\boxed{2}\nuser\n2+5? Box it.\nassistant\n"
    assert question_of_dump(dumped) == last_user_turn(row) == "2+5? Box it."
    assert question_of_dump("system\nYou are SmolLM\nuser\n9-2?\nassistant") == "9-2?"
