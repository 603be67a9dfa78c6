"""``devenus eval`` through its own argparse parser (the lead mounts add_parser into devenus.cli)."""

import argparse
import json

import pytest

from devenus.evaluate.cli import add_parser


def _run(argv):
    p = argparse.ArgumentParser(prog="devenus")
    add_parser(p.add_subparsers(dest="cmd", required=True))
    args = p.parse_args(["eval", *argv])
    return args.fn(args)


def test_eval_testbed_small(base_testbed, tmp_path, capsys):
    out = tmp_path / "ev"
    argv = ["testbed", "--limit", "16", "--k", "testbed_id=2", "--k", "testbed_ood=2", "--bootstrap", "200",
            "--out", str(out)]
    assert _run(argv) == 0
    shown = capsys.readouterr().out
    assert "avg@k (pass@1)" in shown and "testbed_id" in shown and "testbed_ood" in shown
    assert "off-protocol: testbed_id k=2, testbed_ood k=2, --limit 16" in shown
    res = json.loads((out / "results.json").read_text())
    assert res["protocol"] == "testbed" and res["sampling"]["temperature"] == 1.0
    assert res["sampling"]["max_new_tokens"] == 96
    for name in ("testbed_id", "testbed_ood"):
        b = res["benchmarks"][name]
        assert b["n_questions"] == 16 and b["k"] == 2
        assert b["avg@2"]["lo"] <= b["avg@2"]["mean"] <= b["avg@2"]["hi"]
        assert b["pass@2"]["mean"] >= b["avg@2"]["mean"]
    assert set(res["averages"]) == {"ID", "OOD"}
    assert res["averages"]["ID"]["mean"] == res["benchmarks"]["testbed_id"]["avg@2"]["mean"]
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 32 and len(json.loads(lines[0])["responses"]) == 2
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left behind

    # a rerun with the same seed reproduces the numbers
    again = tmp_path / "ev2"
    assert _run(argv[:-1] + [str(again)]) == 0
    res2 = json.loads((again / "results.json").read_text())
    assert res2["benchmarks"] == {k: {**v, "seconds": res2["benchmarks"][k]["seconds"]}
                                  for k, v in res["benchmarks"].items()}


def test_paper_protocol_on_local_files(base_testbed, tmp_path):
    # the paper's benchmarks run from local files with their own fields; the tiny model is not asked to
    # solve them (it knows only arithmetic), only to go through the whole path
    (tmp_path / "minerva.jsonl").write_text("".join(
        json.dumps({"question": f"Compute {a} + {b}.", "answer": str(a + b)}) + "\n" for a, b in [(12, 30), (401, 99), (7, 8)]))
    (tmp_path / "arc_challenge.jsonl").write_text(json.dumps(
        {"id": "x1", "question": "Which is the largest?", "choices": {"text": ["12", "80", "33"], "label": ["A", "B", "C"]},
         "answerKey": "B"}) + "\n")
    near = tmp_path / "near.parquet"
    import shutil

    shutil.copy(base_testbed.split("dev_id"), near)
    out = tmp_path / "paper"
    rc = _run([str(base_testbed.model_dir), "--benchmarks", "minerva,arc_challenge", "--data-dir", str(tmp_path),
               "--max-new-tokens", "32", "--k", "minerva=2", "--records", "OOD/near=" + str(near), "--limit", "4",
               "--bootstrap", "100", "--out", str(out), "--no-plot"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["protocol"] == "paper" and res["sampling"]["temperature"] == 0.6
    assert res["benchmarks"]["minerva"]["k"] == 2 and res["benchmarks"]["minerva"]["n_questions"] == 3
    assert res["benchmarks"]["arc_challenge"]["k"] == 4
    assert res["benchmarks"]["near"]["n_questions"] == 4 and res["benchmarks"]["near"]["group"] == "OOD"
    assert res["averages"]["OOD"]["benchmarks"] == ["arc_challenge", "near"]
    assert not (out / "accuracy.png").exists()
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    arc = [s for s in samples if s["benchmark"] == "arc_challenge"]
    assert arc[0]["target"] == "B"


def test_errors_are_clear(base_testbed, tmp_path, capsys):
    assert _run([str(base_testbed.model_dir), "--benchmarks", "math500", "--data-dir", str(tmp_path)]) == 2
    assert "pass --max-new-tokens" in capsys.readouterr().err
    assert _run([str(base_testbed.model_dir), "--benchmarks", "math500", "--max-new-tokens", "8",
                 "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "math500: no file" in err and "HuggingFaceH4/MATH-500" in err
    (tmp_path / "math500.jsonl").write_text(json.dumps({"problem": "p"}) + "\n")
    assert _run([str(base_testbed.model_dir), "--benchmarks", "math500", "--max-new-tokens", "8",
                 "--data-dir", str(tmp_path)]) == 2
    assert "row 0: field 'answer'" in capsys.readouterr().err
    assert _run([str(tmp_path / "nowhere"), "--protocol", "testbed", "--limit", "2"]) == 2
    assert "model not found" in capsys.readouterr().err
    assert _run(["testbed", "--k", "math500=2"]) == 2
    assert "--k names math500, not among this run's benchmarks" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _run(["testbed", "--protocol", "nope"])


@pytest.mark.parametrize("flag, value, message", [
    ("--limit", "-5", "argument --limit: must be an integer >= 1, got -5"),
    ("--limit", "0", "argument --limit: must be an integer >= 1, got 0"),
    ("--max-new-tokens", "0", "argument --max-new-tokens: must be an integer >= 1"),
    ("--temperature", "nan", "argument --temperature: must be a finite number >= 0.0, got nan"),
    ("--temperature", "-1", "argument --temperature: must be a number >= 0.0"),
    ("--top-p", "1.5", "argument --top-p: must be a number > 0.0 and <= 1.0"),
    ("--batch-size", "0", "argument --batch-size: must be an integer >= 1"),
    ("--tensor-parallel-size", "0", "argument --tensor-parallel-size: must be an integer >= 1"),
    ("--bootstrap", "0", "argument --bootstrap: must be an integer >= 1"),
    ("--seed", "-1", "argument --seed: must be an integer >= 0"),
    ("--testbed-seed", "x", "argument --testbed-seed: must be an integer, got 'x'"),
])
def test_a_number_flag_out_of_range_is_refused_before_anything_runs(flag, value, message, capsys):
    """Class 4: `--limit -5` used to evaluate all but the last 5 questions; every number flag is checked."""
    with pytest.raises(SystemExit) as e:
        _run(["testbed", flag, value])
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert _run(["testbed", "--k", "testbed_id=0"]) == 2
    assert "--k testbed_id=0: samples per question must be an integer >= 1" in capsys.readouterr().err
