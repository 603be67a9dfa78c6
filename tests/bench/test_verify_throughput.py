"""bench/verify_throughput.py --mix latex and its corpus (bench/verify_latex_corpus.py): the committed corpus is
the generator's output and its human labels hold up, the summary's arithmetic on hand-built timings, and a
``--quick`` run's JSON."""

import importlib.util
import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def corpus():
    return _load("verify_latex_corpus")


@pytest.fixture(scope="module")
def bench(corpus):
    return _load("verify_throughput")


@pytest.fixture(scope="module")
def rows(corpus):
    return corpus.load()


def test_the_committed_corpus_is_the_generators_output(corpus):
    assert corpus.CORPUS.read_text(encoding="utf-8") == corpus.dumps(corpus.build())
    assert corpus.build(seed=1) != corpus.build()  # the seed matters, so the check above can fail


def test_the_corpus_covers_every_class_with_right_and_near_miss_pairs(rows):
    assert len(rows) >= 600
    assert len({r["id"] for r in rows}) == len(rows)
    per = Counter((r["class"], r["label"]) for r in rows)
    classes = {"fraction", "root", "interval", "set", "matrix", "unit", "percent", "equation"}
    assert {c for c, _ in per} == classes
    assert all(per[c, 1] >= 30 and per[c, 0] >= 30 for c in classes), per
    assert {r["style"] for r in rows} >= {"boxed", "minerva", "answer line", "answer is"}
    # a corrected early box, in both directions (it must never be what is graded)
    assert {r["label"] for r in rows if r["early"]} == {0, 1}


def test_the_human_labels_are_self_consistent(corpus, rows):
    labels: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        labels.setdefault((r["gold"], r["answer"]), set()).add(r["label"])
        assert r["answer"] != r["gold"], r["id"]  # no pair is a string match
        # the label is the final answer's: the response ends with it, a corrected box comes before it
        final = corpus.STYLES[r["style"]](r["answer"])
        assert r["response"].endswith(final), r["id"]
        if r["early"]:
            assert r["response"].index(f"$\\boxed{{{r['early']}}}$. Wait") < len(r["response"]) - len(final), r["id"]
    assert all(len(v) == 1 for v in labels.values())


def test_math_verify_agrees_with_the_human_labels_on_the_bare_answers(rows):
    """Every right pair's gold is graded 1 against itself by math-verify (where it parses), and on the bare
    answers the field's reference gives the human label everywhere: a pair where it does not is a label to
    fix or a convention to name here, not a silent disagreement."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    # no time limits: a label is a property of the strings, and math-verify's 5 s alarm turns a slow comparison
    # into a 0 (set-010 takes 1.8 s alone; on a loaded 2-core machine it timed out and failed this test)
    def read(s):
        return parse("$" + s + "$", parsing_timeout=None)

    def agree(a, b):
        return bool(verify(a, b, timeout_seconds=None))

    parsed = {g: read(g) for g in {r["gold"] for r in rows}}
    right_golds = sorted({r["gold"] for r in rows if r["label"] == 1})
    readable = [g for g in right_golds if parsed[g]]
    assert len(readable) >= 0.9 * len(right_golds), [g for g in right_golds if not parsed[g]]
    assert [g for g in readable if not agree(parsed[g], parsed[g])] == []
    differ = [r["id"] for r in rows if agree(parsed[r["gold"]], read(r["answer"])) != bool(r["label"])]
    assert differ == []


def test_load_names_the_line_of_a_bad_row(corpus, tmp_path):
    bad = tmp_path / "c.jsonl"
    good = corpus.dumps(corpus.build(per_class=2)[:1])
    bad.write_text(good + '{"id": "x"}\n')
    with pytest.raises(ValueError, match=r"c\.jsonl:2: missing field"):
        corpus.load(bad)
    bad.write_text(good.replace('"label": 1', '"label": 2').replace('"label": 0', '"label": 2'))
    with pytest.raises(ValueError, match=r"c\.jsonl:1: field 'label'"):
        corpus.load(bad)


def test_summary_takes_medians_of_same_repeat_ratios_and_lists_mismatches(bench):
    pairs = [{"id": f"p{i}", "class": "set", "form": "f", "style": "s", "early": None, "gold": "1", "answer": "2",
              "label": lab} for i, lab in enumerate([1, 0])]
    m = {"classes": ["set"], "rows": {"set": pairs}, "stats": {},
         "secs": {"set": {"ours": [1.0, 2.0, 1.0], "mathverify": [3.0, 2.0, 4.0]}},
         "labels": {"set": {"ours": [[True, True], [True, True], [True, False]],
                            "mathverify": [[True, False]] * 3}}}
    res = bench.summarise(m, "reward")
    row = res["classes"][0]
    assert row["ratio"] == pytest.approx(3.0) and row["ratio_range"] == [1.0, 4.0]  # median of 3, 1, 4
    assert row["ours_pairs_per_s"] == pytest.approx(2.0) and row["mathverify_pairs_per_s"] == pytest.approx(2 / 3)
    assert (row["ours_agree"], row["ours_false_pos"], row["mathverify_agree"], row["mismatches"]) == (1, 1, 2, 1)
    assert row["unstable"] == 1  # p1 flipped in the third repeat; the first repeat's label is reported
    assert [mm["id"] for mm in res["mismatches"]] == ["p1"]
    assert res["all"]["ratio"] == res["ratio"] == pytest.approx(3.0)


def test_a_quick_latex_run_writes_the_table_as_json(tmp_path):
    out = tmp_path / "r.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "verify_throughput.py"), "--mix", "latex", "--quick",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "headline: reward path" in run.stdout
    res = json.loads(out.read_text())
    assert (res["bench"], res["mix"], res["quick"], res["repeats"]) == ("verify_throughput", "latex", True, 1)
    assert len(res["commit"]) == 40 and res["date"].endswith("+00:00")
    assert res["machine"]["cpu_model"] and res["machine"]["cores"] >= 1
    assert len(res["machine"]["loadavg_start"]) == len(res["machine"]["loadavg_end"]) == 3
    assert res["threads"]["OMP_NUM_THREADS"] == "1"
    assert res["corpus"]["pairs"] == 32 and len(res["corpus"]["sha256"]) == 64
    keys = {"class", "pairs", "ours_pairs_per_s", "mathverify_pairs_per_s", "ratio", "ratio_range", "ours_agree",
            "mathverify_agree", "mismatches", "ours_false_pos", "ours_false_neg", "mathverify_false_pos",
            "mathverify_false_neg", "unstable"}
    assert set(res["paths"]) == {"reward", "equivalent"}
    for path in res["paths"].values():
        assert len(path["classes"]) == 8 and all(set(r) == keys for r in path["classes"] + [path["all"]])
        assert sum(r["pairs"] for r in path["classes"]) == path["all"]["pairs"] == 32
        assert all(r["ratio"] > 0 and 0 <= r["ours_agree"] <= r["pairs"] for r in path["classes"])
        assert len(path["mismatches"]) == path["all"]["mismatches"]
        assert path["verifier_stats"]["checks"] == 32
    assert res["ratio"] == res["paths"]["reward"]["all"]["ratio"]
