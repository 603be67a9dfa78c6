"""The devenus CLI: every dataset-writing command leaves a verified manifest, one overwrite rule,
user errors as one line (exit 1), usage errors exit 2, --version, help on every option."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys

import pytest

import devenus.atomic as atomic
from devenus.cli import COMMAND_MODULES, DESCRIPTION, build_parser, main
from devenus.records import make_row, read_records, write_records
from devenus.records.versions import manifest_path, read_manifest, verify_manifest


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def gsm(tmp_path):
    p = tmp_path / "gsm.jsonl"
    p.write_text("".join(json.dumps({"question": f"What is {i}+{i}?", "answer": f"#### {2 * i}"}) + "\n" for i in range(20)))
    return p


def records(tmp_path, name="d.parquet", view=None, n=6):
    rows = [make_row(data_source="t", index=f"t/{i}{'-' + view if view else ''}", source="t",
                     question=f"Q{i} {view or ''}?", ground_truth=str(i),
                     extra={"pair_key": f"p{i}", "view": view}) for i in range(n)]
    return write_records(rows, tmp_path / name)


def check_version(out, parents):
    m = verify_manifest(out, parents=parents)
    assert m.output["sha256"] == sha(out)
    assert [p.sha256 for p in m.parents] == [sha(p) for p in parents]
    return m


def test_import_leaves_a_verified_manifest(tmp_path, capsys):
    src = gsm(tmp_path)
    assert main(["import", str(src), "--out", str(tmp_path / "d0.parquet"), "--source", "gsm8k", "--no-progress"]) == 0
    m = check_version(tmp_path / "d0.parquet", [src])
    assert m.rule == "import" and m.parents[0].rows == 20 and m.output["rows"] == 20
    assert "manifest" in capsys.readouterr().out


def test_hide_labels_leaves_a_verified_manifest_listing_every_hidden_row(tmp_path):
    src = records(tmp_path)
    out = tmp_path / "semi.parquet"
    assert main(["data", "hide-labels", str(src), "--labeled-fraction", "0.5", "--out", str(out), "--no-progress"]) == 0
    m = check_version(out, [src])
    rows = read_records(out)
    hidden = {r["extra_info"]["index"] for r in rows if not r["extra_info"]["labeled"]}
    assert len(hidden) == 3 and m.counts["changed_rows"] == 3
    assert {c.key for c in m.changes} == hidden
    assert {c.field for c in m.changes} == {"reward_model.ground_truth", "extra_info.labeled", "extra_info.label_source",
                                            "simulation.hidden_answer", "simulation.noise"}
    moved = {c.key: c.after for c in m.changes if c.field == "simulation.hidden_answer"}
    assert moved == {c.key: c.before for c in m.changes if c.field == "reward_model.ground_truth"}
    assert m.config == {"labeled_fraction": 0.5, "seed": 0}


def test_hide_labels_streams_in_batches_with_the_same_result(tmp_path):
    from devenus.records import hide_labels
    from devenus.records.labels import hide_labels_file

    src = records(tmp_path, n=50)
    hide_labels_file(src, tmp_path / "b.parquet", 0.3, seed=2, batch_rows=7, progress=False)
    assert read_records(tmp_path / "b.parquet") == hide_labels(read_records(src), 0.3, seed=2)


def test_pair_views_leaves_a_verified_manifest(tmp_path):
    a, b = records(tmp_path, "a.parquet"), records(tmp_path, "b.parquet", view="paraphrase")
    out = tmp_path / "pairs.parquet"
    assert main(["data", "pair-views", str(a), str(b), "--out", str(out)]) == 0
    m = check_version(out, [a, b])
    assert m.rule == "pair-views" and m.output["rows"] == 12
    assert {(c.field, c.after) for c in m.changes} == {("extra_info.view", "original")}


@pytest.mark.slow
def test_testbed_noise_leaves_a_verified_manifest(tmp_path, base_testbed):
    out = tmp_path / "noisy.parquet"
    assert main(["testbed", "noise", "--rho", "0.25", "--regime", "inactive", "--out", str(out), "--no-progress"]) == 0
    m = check_version(out, [base_testbed.split("train")])
    noisy = [r for r in read_records(out) if r["simulation"]["noise"] == "inactive"]
    assert m.counts["changed_rows"] == len(noisy) > 0
    assert {c.field for c in m.changes} == {"reward_model.ground_truth", "simulation.noise"}
    # same command, same bytes
    again = tmp_path / "again" / "noisy.parquet"
    assert main(["testbed", "noise", "--rho", "0.25", "--regime", "inactive", "--out", str(again), "--no-progress"]) == 0
    assert again.read_bytes() == out.read_bytes()
    assert manifest_path(again).read_bytes() == manifest_path(out).read_bytes()
    # the train split is never the output
    assert main(["testbed", "noise", "--rho", "0.25", "--regime", "inactive", "--out",
                 str(base_testbed.split("train")), "--force"]) == 1


# --- one overwrite rule ------------------------------------------------------------------------------
def test_every_command_refuses_an_existing_output_without_force(tmp_path, capsys):
    src, a, b = gsm(tmp_path), records(tmp_path, "a.parquet"), records(tmp_path, "b.parquet", view="paraphrase")
    out = tmp_path / "exists.parquet"
    out.write_bytes(b"keep me")
    for argv in (["import", str(src), "--out", str(out)],
                 ["data", "hide-labels", str(a), "--labeled-fraction", "0.5", "--out", str(out)],
                 ["data", "pair-views", str(a), str(b), "--out", str(out)]):
        assert main(argv) == 1, argv
        assert "exists (use --force" in capsys.readouterr().err
        assert out.read_bytes() == b"keep me"
        assert main(argv + ["--force"]) == 0, argv
        verify_manifest(out)
        out.write_bytes(b"keep me")


def test_every_command_refuses_its_input_as_output_even_with_force(tmp_path, capsys):
    src, a, b = gsm(tmp_path), records(tmp_path, "a.parquet"), records(tmp_path, "b.parquet", view="paraphrase")
    before = {p: p.read_bytes() for p in (src, a, b)}
    for argv in (["import", str(src), "--out", str(src), "--force"],
                 ["data", "hide-labels", str(a), "--labeled-fraction", "0.5", "--out", str(a), "--force"],
                 ["data", "pair-views", str(a), str(b), "--out", str(b), "--force"]):
        assert main(argv) == 1, argv
        assert "is the input" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in before} == before


# --- errors -------------------------------------------------------------------------------------------
def test_user_errors_are_one_line_exit_1(tmp_path, capsys):
    a = records(tmp_path, "a.parquet")
    cases = [
        (["data", "hide-labels", str(tmp_path / "missing.parquet"), "--labeled-fraction", "0.5", "--out", str(tmp_path / "o.parquet")], "not found"),
        (["data", "hide-labels", str(a), "--labeled-fraction", "0.5", "--out", str(tmp_path)], "is a directory"),
        (["data", "hide-labels", str(tmp_path), "--labeled-fraction", "0.5", "--out", str(tmp_path / "o.parquet")], "is a directory"),
        (["data", "hide-labels", str(a), "--labeled-fraction", "0.5", "--out", "/sys/devenus-ro/o.parquet"], "error: "),
        (["import", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "o.parquet")], "not found"),
    ]
    for argv, text in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and text in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "o.parquet").exists()


def test_a_full_disk_is_a_user_error(tmp_path, capsys, monkeypatch):
    a = records(tmp_path, "a.parquet")

    def full(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "commit_temp", full)
    assert main(["data", "hide-labels", str(a), "--labeled-fraction", "0.5", "--out", str(tmp_path / "o.parquet")]) == 1
    assert capsys.readouterr().err == "error: no space left on device\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet"]


def test_usage_errors_exit_2(tmp_path, capsys):
    a = records(tmp_path, "a.parquet")
    for bad in ("1.5", "-0.1", "half"):
        with pytest.raises(SystemExit) as ei:
            main(["data", "hide-labels", str(a), "--labeled-fraction", bad, "--out", str(tmp_path / "o.parquet")])
        assert ei.value.code == 2
        assert "argument --labeled-fraction: must be a" in capsys.readouterr().err


def test_no_traceback_from_the_real_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "devenus", "data", "hide-labels", str(tmp_path / "nope.parquet"),
                           "--labeled-fraction", "0.5", "--out", str(tmp_path / "o.parquet")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


def test_version_help_and_description(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0 and capsys.readouterr().out.startswith("devenus ")
    assert "``" not in DESCRIPTION and ":func:" not in DESCRIPTION
    missing = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, path + [name])
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(" ".join(path + [action.dest]))
        assert "``" not in (parser.description or ""), path

    walk(build_parser(), ["devenus"])
    assert missing == []


def test_command_modules_mount_themselves():
    import importlib

    for name in COMMAND_MODULES:
        assert callable(importlib.import_module(name).add_parser), name
    sub = build_parser()._subparsers._group_actions[0].choices
    assert {"testbed", "demo", "import", "data"} <= set(sub)


def test_building_the_parser_imports_no_torch():
    # every `devenus` command builds the whole parser first: torch there costs ~2 s of each start-up
    # (the data commands, the transition builder and the test suite's CLI subprocesses never need it)
    code = ("import sys, devenus.cli; devenus.cli.build_parser(); "
            "heavy = sorted(m for m in ('torch', 'transformers', 'verl', 'ray') if m in sys.modules); "
            "print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_the_online_package_still_exports_its_public_names():
    import devenus.online as online
    from devenus.online.method import OnlineMethod
    from devenus.online.registry import WeakTrainerInterface

    assert online.OnlineMethod is OnlineMethod and online.WeakTrainerInterface is WeakTrainerInterface
    assert set(online.__all__) <= set(dir(online))
    with pytest.raises(AttributeError):
        online.no_such_name


@pytest.mark.parametrize("argv, flag, message", [
    (["demo", "--steps", "0"], "--steps", "must be an integer >= 1, got 0"),
    (["testbed", "build", "--seed", "-1"], "--seed", "must be an integer >= 0, got -1"),
    (["testbed", "noise", "--rho", "0.5", "--regime", "inactive", "--samples", "many"], "--samples",
     "must be an integer, got 'many'"),
    (["train", "--model", "m", "--train", "t", "--val", "v", "--out", "o", "--timeout", "-5"], "--timeout",
     "must be a number > 0, got -5"),
    (["transition", "d", "--evidence", "e", "--rule", "promote", "--out", "o", "--round", "1.5"], "--round",
     "must be an integer, got '1.5'"),
    (["data", "hide-labels", "in", "--labeled-fraction", "0.5", "--out", "o", "--seed", "nan"], "--seed",
     "must be an integer, got 'nan'"),
])
def test_number_flags_are_checked_like_config_keys(argv, flag, message, capsys):
    """Every number flag goes through the config mechanism's bounds: one line naming the flag, exit 2."""
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"argument {flag}: {message}"), err
