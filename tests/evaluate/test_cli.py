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


# ------------------------------------------------------------------------------ your own record files
def test_record_spec_forms(tmp_path):
    from devenus.evaluate.cli import record_spec

    assert record_spec("data/id.parquet") == ("ID", "id", "data/id.parquet")
    assert record_spec("data/id.parquet:mine") == ("ID", "mine", "data/id.parquet")
    assert record_spec("data/far.parquet:ood/far") == ("OOD", "far", "data/far.parquet")
    assert record_spec("OOD/near=near.parquet") == ("OOD", "near", "near.parquet")  # the older spelling
    odd = tmp_path / "lr=1e-6:v2.parquet"  # an existing file is a file, '=' and ':' included
    odd.write_bytes(b"")
    assert record_spec(f"{odd}:v2") == ("ID", "v2", str(odd))
    with pytest.raises(ValueError, match="name 'lr=1e-6:v2' must be letters.*give one with FILE:NAME"):
        record_spec(str(odd))
    for bad, says in (("x.parquet:TEST/x", "group must be ID or OOD"), ("x.parquet:a,b", "must be letters"),
                      (":x", "no file")):
        with pytest.raises(ValueError, match=says):
            record_spec(bad)


def _own_files(base_testbed, tmp_path):
    import shutil

    mine, far = tmp_path / "my_questions.parquet", tmp_path / "far.parquet"
    shutil.copy(base_testbed.split("dev_id"), mine)
    shutil.copy(base_testbed.split("test_ood"), far)
    return mine, far


def test_own_files_under_their_own_names_without_a_protocol(base_testbed, tmp_path, capsys):
    # no --protocol and no benchmark folder: only the files named, each under its own name; nothing asks
    # for AIME files, nothing is called testbed_id
    mine, far = _own_files(base_testbed, tmp_path)
    out = tmp_path / "own"
    rc = _run([str(base_testbed.model_dir), "--records", str(mine), f"{far}:OOD/far_away", "--limit", "6",
               "--k", "my_questions=2", "--max-new-tokens", "24", "--bootstrap", "100", "--out", str(out)])
    assert rc == 0
    cap = capsys.readouterr()
    assert "protocol records: my_questions (6 x 2), far_away (6 x 4)" in cap.out
    assert "testbed_id" not in cap.out and "cut at max tokens" in cap.out
    # stderr is no terminal here: the progress comes as plain lines, per question, ending at the total
    assert "my_questions: 6/6 q (100%)" in cap.err and "far_away: 6/6 q (100%)" in cap.err
    res = json.loads((out / "results.json").read_text())
    assert res["protocol"] == "records" and res["sampling"]["max_new_tokens"] == 24
    assert set(res["benchmarks"]) == {"my_questions", "far_away"}
    assert res["averages"]["ID"]["benchmarks"] == ["my_questions"]
    assert res["averages"]["OOD"]["benchmarks"] == ["far_away"]
    for b in res["benchmarks"].values():
        assert 0 <= b["truncated_rate"] <= b["abstain_rate"] <= 1  # a cut sample has no answer
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    cut = [t for s in samples if s["benchmark"] == "far_away" for t in s["truncated"]]
    assert res["benchmarks"]["far_away"]["truncated_rate"] == pytest.approx(sum(cut) / len(cut))
    assert {s["benchmark"] for s in samples} == {"my_questions", "far_away"}
    assert (out / "accuracy.png").is_file()


def test_the_token_limit_shows_as_the_cut_share(base_testbed, tmp_path):
    mine, _ = _own_files(base_testbed, tmp_path)
    out = tmp_path / "cut"
    assert _run([str(base_testbed.model_dir), "--records", f"{mine}:mine", "--limit", "3", "--k", "mine=1",
                 "--max-new-tokens", "1", "--bootstrap", "50", "--out", str(out), "--no-plot"]) == 0
    b = json.loads((out / "results.json").read_text())["benchmarks"]["mine"]
    assert b["truncated_rate"] == 1.0 and b["abstain_rate"] == 1.0  # one token never reaches EOS


def test_benchmarks_accepts_record_names(base_testbed, tmp_path, capsys):
    mine, _ = _own_files(base_testbed, tmp_path)
    out = tmp_path / "sub"
    # beside a protocol: --benchmarks names the file's name, so the protocol's own benchmarks stay out
    assert _run([str(base_testbed.model_dir), "--protocol", "testbed", "--records", f"{mine}:mine",
                 "--benchmarks", "mine", "--limit", "2", "--k", "mine=1", "--bootstrap", "50", "--out", str(out),
                 "--no-plot"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["protocol"] == "testbed" and list(res["benchmarks"]) == ["mine"]
    assert "protocol testbed: mine (2 x 1)" in capsys.readouterr().out


def test_own_file_errors_are_one_line(base_testbed, tmp_path, capsys):
    mine, far = _own_files(base_testbed, tmp_path)
    model = str(base_testbed.model_dir)
    cases = [
        (["--records", f"{mine}:a", f"{far}:a"], "--records: two files named 'a'"),
        (["--protocol", "testbed", "--records", f"{mine}:testbed_id"], "'testbed_id' is already a benchmark of protocol 'testbed'"),
        (["--protocol", "records"], "protocol 'records' evaluates the files given with --records"),
        (["--records", str(mine), "--benchmarks", "my_questions,nope"], "--benchmarks names nope, not among"),
        (["--records", str(tmp_path / "missing.parquet")], "missing: file not found"),
        (["--records", f"{mine}:BAD/x"], "group must be ID or OOD"),
    ]
    for argv, says in cases:
        assert _run([model, *argv, "--out", str(tmp_path / "never")]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1, (argv, err)
    assert not (tmp_path / "never").exists()
