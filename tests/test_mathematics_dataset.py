"""The shipped mathematics_dataset records (src/devenus/data/mathematics_dataset/): the files match their
manifest, follow the record contract, and the reward grades every gold answer right (1 against itself, 0
against near misses). These read the shipped files only; the generator (scripts/mathematics_dataset.py)
needs its own venv and is not run here."""

import hashlib
import json
import re
from collections import Counter

import pytest

from devenus.data import MATHEMATICS_DATASET, SPLITS, mathematics_dataset
from devenus.records import read_records
from devenus.verify.reward import compute_score

MANIFEST = json.loads((MATHEMATICS_DATASET / "dataset.json").read_text())
ROWS = {s: read_records(mathematics_dataset(s)) for s in SPLITS}  # read_records validates the contract


def test_the_manifest_names_every_file_with_its_hash_split_and_modules():
    assert {f"{s}.parquet" for s in SPLITS} == set(MANIFEST["files"])
    assert MANIFEST["versions"]["sympy"] == "1.5.1" and "sympy==1.5.1" in MANIFEST["pins"]
    assert f"mathematics_dataset=={MANIFEST['versions']['mathematics_dataset']}" in MANIFEST["pins"]
    assert isinstance(MANIFEST["seed"], int)
    regimes = {"train": "train-easy", "test_id": "interpolate", "test_ood": "extrapolate"}
    for s in SPLITS:
        entry = MANIFEST["files"][f"{s}.parquet"]
        path = mathematics_dataset(s)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], f"{path} differs from dataset.json"
        assert entry["split"] == s and entry["regime"] == regimes[s]
        rows = ROWS[s]
        assert Counter(r["extra_info"]["family"] for r in rows) == entry["modules"]
        assert {r["extra_info"]["split"] for r in rows} == {s}
        # devenus import wrote it: its own manifest beside it, whose raw parent is the generated JSONL
        imp = json.loads(path.with_name(f"{s}.manifest.json").read_text())
        assert imp["rule"] == "import" and entry["raw_sha256"] in json.dumps(imp["parents"])
    # the extrapolate modules are the chosen modules' own counterparts
    assert list(MANIFEST["files"]["train.parquet"]["modules"]) == list(MANIFEST["modules"])
    assert list(MANIFEST["files"]["test_ood.parquet"]["modules"]) == [m for m in MANIFEST["modules"].values() if m]


def test_rows_are_labeled_real_data_with_the_manifests_prompt_and_no_question_in_two_splits():
    template = MANIFEST["prompt_template"]
    seen = Counter()
    for s in SPLITS:
        for r in ROWS[s]:
            q = r["extra_info"]["question"]
            assert r["extra_info"]["labeled"] and r["extra_info"]["label_source"] == "gold"
            assert r["reward_model"]["ground_truth"].strip()
            assert r["simulation"] is None  # real data: no simulation truth
            assert r["prompt"] == [{"role": "user", "content": template.replace("{question}", q)}]
            assert r["extra_info"]["index"].startswith(f"mathematics_dataset/{s}/")
            seen[q] += 1
    assert max(seen.values()) == 1


def near_misses(gold: str) -> list[str]:
    """Answers a grader must refuse: the other truth value; another option letter; an integer +-1, negated, with its first or last
    digit changed; a decimal's last digit changed, +1, negated; a fraction's numerator or denominator +1."""
    if gold in ("True", "False"):
        return ["False" if gold == "True" else "True"]
    if re.fullmatch(r"[a-z]", gold):  # an option of "Which is the smallest value? (a) 4 (b) 1 ..."
        return [x for x in "abcdefg" if x != gold][:3]
    if m := re.fullmatch(r"(-?)(\d+)/(\d+)", gold):
        sign, a, b = m.groups()
        return [f"{sign}{int(a) + 1}/{b}", f"{sign}{a}/{int(b) + 1}", gold.lstrip("-") if sign else f"-{gold}"]
    if re.fullmatch(r"-?\d+(\.\d+)?", gold):
        out = [gold[:-1] + str((int(gold[-1]) + 1) % 10)]  # the last digit (of an integer: usually +1)
        first = 1 if gold.startswith("-") else 0
        if len(gold) - first > 1:  # the first digit (1..9, never a leading zero)
            out.append(gold[:first] + str(int(gold[first]) % 9 + 1) + gold[first + 1:])
        if "." not in gold:
            out += [str(int(gold) + 1), str(int(gold) - 1)]
        if gold.strip("-0.") != "":
            out.append(gold[1:] if gold.startswith("-") else f"-{gold}")
        return [x for x in dict.fromkeys(out) if x != gold]
    raise AssertionError(f"an answer form this test does not know: {gold!r}")


def test_near_misses_are_all_different_values():
    assert near_misses("7") == ["8", "6", "-7"]
    assert near_misses("-39") == ["-30", "-49", "-38", "-40", "39"]
    assert near_misses("57.2") == ["57.3", "67.2", "-57.2"]
    assert near_misses("-5/3") == ["-6/3", "-5/4", "5/3"]
    assert near_misses("0") == ["1", "-1"]
    assert near_misses("b") == ["a", "c", "d"]
    assert near_misses("-0.0547") == ["-0.0548", "-1.0547", "0.0547"]


@pytest.mark.parametrize("split", SPLITS)
def test_the_reward_grades_every_gold_answer_1_and_its_near_misses_0(split):
    wrong = []
    for r in ROWS[split]:
        gold = r["reward_model"]["ground_truth"]
        say = lambda a: f"We compute it step by step. The final answer is \\boxed{{{a}}}."  # noqa: E731
        if compute_score(r["data_source"], say(gold), gold)["score"] != 1.0:
            wrong.append((r["extra_info"]["index"], gold, gold))
        for miss in near_misses(gold):
            if compute_score(r["data_source"], say(miss), gold)["score"] != 0.0:
                wrong.append((r["extra_info"]["index"], gold, miss))
    assert wrong == [], f"{len(wrong)} graded wrong (key, gold, answer): {wrong[:10]}"


def test_the_worked_turn_is_a_solved_question_of_the_same_module():
    from devenus.data import mathematics_dataset_worked
    from devenus.verify.reward import compute_score

    train = {r["extra_info"]["question"]: r for r in read_records(mathematics_dataset("train"))}
    for split in SPLITS:
        rows = mathematics_dataset_worked(split)
        shipped = read_records(mathematics_dataset(split))
        assert [r["prompt"][-1] for r in rows] == [r["prompt"][-1] for r in shipped]  # the question is untouched
        for r in rows:
            example, answer = r["prompt"][0]["content"], r["prompt"][1]["content"]
            q = example.removesuffix(" Put the final answer in \\boxed{}.")
            src = train[q]  # a train question, of this module or (extrapolate) of its train module
            assert r["extra_info"]["family"].startswith(src["extra_info"]["family"])
            assert compute_score("mathematics_dataset", answer, src["reward_model"]["ground_truth"])["score"] == 1.0
