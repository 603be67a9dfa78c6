"""The one label vocabulary and the one write path: row and Arrow label edits agree, every batch
takes one validated path, the manifest is real JSON (a change file beside it), every input is a
parent, and no output replaces an input or another dataset's manifest (issue 21, bad-input class 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import devenus.records.labels as labels
from devenus.cli import main
from devenus.records import RecordError, make_row, read_records, write_records
from devenus.records.evidence import EvidenceWriter, evidence_parts
from devenus.records.io import records_to_table
from devenus.records.versions import (
    Change,
    VersionError,
    changes_path,
    manifest_path,
    read_manifest,
    row_changes,
    sha256_file,
    verify_manifest,
    write_version,
)

REPO = Path(__file__).resolve().parents[2]


def rows(n=8):
    out = []
    for i in range(n):
        labeled = i % 2 == 0
        sim = None if i % 4 == 0 else {"hidden_answer": str(i) if i % 3 else None, "noise": "none"}
        out.append(make_row(data_source="t", index=f"t/{i}", source="t", question=f"What is {i}?",
                            ground_truth=str(i) if labeled else "", labeled=labeled, simulation=sim))
    return out


def lines_as_changes(table):
    return [Change(**json.loads(line)) for line in table.column("line").to_pylist()]


# ------------------------------------------------------------------------------ the label vocabulary
def by_hand(r, edit):
    """The row the vocabulary's table (labels.py) says an edit leaves, as plain dict edits."""
    new = json.loads(json.dumps(r))
    if edit == "hide":
        if new["reward_model"]["ground_truth"] != "":
            sim = new["simulation"] or {"hidden_answer": None, "noise": "none"}
            if sim["hidden_answer"] is None:
                sim["hidden_answer"] = new["reward_model"]["ground_truth"]
            new["simulation"] = sim
        new["reward_model"]["ground_truth"] = ""
        new["extra_info"].update(labeled=False, label_source="none")
    else:
        new["reward_model"]["ground_truth"] = f"a{r['extra_info']['index']}"
        new["extra_info"].update(labeled=True, label_source={"annotate": "annotated", "promote": "promoted",
                                                             "correct": "corrected"}[edit])
    return new


EDITS = {  # edit -> (the table edit, which rows it applies to)
    "hide": (lambda t, m, why: labels.hide_table(t, m, why), lambda r: True),
    "annotate": (lambda t, m, why: labels.annotate_table(t, m, answers(t), why), lambda r: not r["extra_info"]["labeled"]),
    "promote": (lambda t, m, why: labels.promote_table(t, m, answers(t), why), lambda r: not r["extra_info"]["labeled"]),
    "correct": (lambda t, m, why: labels.correct_table(t, m, answers(t), why), lambda r: r["extra_info"]["labeled"]),
}


def answers(table):
    import pyarrow.compute as pc

    return pc.binary_join_element_wise("a", pc.struct_field(table.column("extra_info"), "index"), "")


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_table_edits_give_the_rows_and_changes_the_vocabulary_says(edit):
    table_fn, applies = EDITS[edit]
    src = records_to_table(rows()).to_pylist()
    table = records_to_table(src)
    mask = [applies(r) and i % 3 != 1 for i, r in enumerate(src)]  # some applicable rows left alone
    why = f"{edit} for the test"
    want_rows, want_changes = [], []
    for r, m in zip(src, mask):
        new = by_hand(r, edit) if m else r
        want_rows.append(new)
        want_changes += row_changes(r, new, why)
    new_table, lines = table_fn(table, pa.array(mask), why)
    assert new_table.to_pylist() == want_rows
    assert lines_as_changes(lines) == want_changes and want_changes  # same changes, same order, not empty
    if edit != "hide":  # a transition rule's edit by label source is the same edit, also on a one-row table
        source = {"annotate": labels.ANNOTATED, "promote": labels.PROMOTED, "correct": labels.CORRECTED}[edit]
        i = mask.index(True)
        one, one_lines = labels.relabel_table(records_to_table([src[i]]), [True], f"a{src[i]['extra_info']['index']}",
                                              why, source)
        assert (one.to_pylist(), lines_as_changes(one_lines)) == ([want_rows[i]], row_changes(src[i], want_rows[i], why))
    else:
        assert labels.hide_labels(src, 0.0) == [by_hand(r, "hide") if r["extra_info"]["labeled"] else r for r in src]
    assert src == records_to_table(rows()).to_pylist()  # the inputs are not modified


def test_each_edit_sets_the_label_state_its_name_says():
    src = rows()
    table = records_to_table(src)
    one = pa.array([i == 1 for i in range(len(src))])  # row 1: unlabeled, with a hidden answer
    t, ch = labels.promote_table(table, one, "7", "evidence")
    new = t.to_pylist()[1]
    assert (new["reward_model"]["ground_truth"], new["extra_info"]["labeled"], new["extra_info"]["label_source"]) == ("7", True, "promoted")
    assert sorted(ch.column("field").to_pylist()) == ["extra_info.label_source", "extra_info.labeled", "reward_model.ground_truth"]
    t, ch = labels.correct_table(t, one, "8", "better")
    assert t.to_pylist()[1]["extra_info"]["label_source"] == "corrected" and ch.column("field").to_pylist() == [
        "extra_info.label_source", "reward_model.ground_truth"]
    t, _ = labels.hide_table(t, one, "withheld")
    assert t.to_pylist()[1]["simulation"]["hidden_answer"] == src[1]["simulation"]["hidden_answer"]  # an existing truth is kept
    again, ch = labels.hide_table(table, one, "again")
    assert again.to_pylist() == table.to_pylist() and ch.num_rows == 0  # hiding an unlabeled row changes nothing


def test_an_edit_of_a_row_in_the_wrong_state_names_the_row():
    src = rows()
    with pytest.raises(labels.LabelStateError, match=r"row 't/0': cannot mark a labeled row promoted"):
        labels.relabel_table(records_to_table(src[:1]), [True], "1", "x", labels.PROMOTED)
    with pytest.raises(labels.LabelStateError, match=r"row 't/1': cannot mark a unlabeled row corrected"):
        labels.correct_table(records_to_table(src), pa.array([False, True] + [False] * 6), "1", "x")


# ------------------------------------------------------------------------------ one write path
def test_rows_and_their_table_give_byte_identical_versions_and_the_same_errors(tmp_path):
    src = rows()
    a = write_version(src, tmp_path / "a.parquet", rule="r", changes=[Change("t/0", "x", 1, 2, "why")])
    b = write_version(records_to_table(src), tmp_path / "b.parquet", rule="r", changes=[Change("t/0", "x", 1, 2, "why")])
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert a.path.read_text().replace("a.parquet", "b.parquet") == b.path.read_text()
    bad = rows()
    bad[3]["extra_info"]["label_source"] = "gold"  # an unlabeled row that claims a gold label
    errors = []
    for i, batch in enumerate((bad, records_to_table(bad, validate=False))):
        with pytest.raises(RecordError) as ei:
            write_version(batch, tmp_path / f"bad{i}.parquet", rule="r")
        errors.append(str(ei.value).replace(f"bad{i}", "bad"))
    assert errors[0] == errors[1] and "row 3" in errors[0]
    with pytest.raises(RecordError, match="row 2 .*prompt"):  # rows no Arrow column can hold: the row checker names them
        write_version(rows()[:2] + [{**rows()[2], "prompt": 5}], tmp_path / "bad.parquet", rule="r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.changes.jsonl", "a.manifest.json", "a.parquet",
                                                          "b.changes.jsonl", "b.manifest.json", "b.parquet"]


def test_the_manifest_is_one_json_document_and_the_change_file_json_lines(tmp_path):
    changes = [Change(f"t/{i}", "reward_model.ground_truth", str(i), f"new\n{i}", "why \"quoted\"") for i in range(5)]
    m = write_version(rows(), tmp_path / "v.parquet", rule="r", changes=changes)
    doc = json.loads(m.path.read_text())  # the whole file, with the standard parser
    assert doc["format"] == "devenus.version/2" and doc["refusals"] == []
    assert doc["changes"] == {"count": 5, "sha256": sha256_file(changes_path(tmp_path / "v.parquet"))}
    lines = changes_path(tmp_path / "v.parquet").read_text().splitlines()
    assert [Change(**json.loads(line)) for line in lines] == changes == read_manifest(m.path).changes
    # a version without changes has no change file, and says so
    m2 = write_version(rows(), tmp_path / "w.parquet", rule="r")
    assert json.loads(m2.path.read_text())["changes"] is None and m2.changes == []
    assert not changes_path(tmp_path / "w.parquet").exists()
    # the change file is pinned by its hash
    changes_path(tmp_path / "v.parquet").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(VersionError, match=r"v.changes.jsonl does not match its manifest"):
        verify_manifest(tmp_path / "v.parquet")


def test_every_committed_manifest_still_reads():
    found = subprocess.run(["git", "ls-files", "*.manifest.json"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert found, "the repository holds committed dataset versions"
    for name in found:
        m = read_manifest(REPO / name)
        assert len(m.changes) == m.counts["changes"] and len(m.refusals) == m.counts["refused"], name
        assert m.parents and all(len(p.sha256) == 64 for p in m.parents), name
        if m.output_path.exists():
            verify_manifest(m.path)


def test_every_input_is_a_parent_with_its_hash(tmp_path):
    d0 = write_records(rows(), tmp_path / "d0.parquet")
    ev = evidence(tmp_path / "evidence")
    parts = evidence_parts(ev)
    assert len(parts) == 2 and evidence_parts(ev, round=1) == parts[1:]
    m = write_version(rows(), tmp_path / "d1.parquet", rule="r", parent=[d0], inputs=[d0, *parts])
    assert [(p.name, p.sha256) for p in m.parents] == [(f.name, sha256_file(f)) for f in (d0, *parts)]
    verify_manifest(m.path, parents=[d0, *parts])


def evidence(folder):
    for rnd in (0, 1):
        with EvidenceWriter(folder, method="m", round=rnd) as w:
            w.append("t/0", 1, "vote", majority_answer="1", majority_pass_rate=0.5)
    return folder


# ------------------------------------------------------------------------------ class 2: outputs vs inputs
def test_an_output_never_replaces_an_input_or_another_datasets_manifest(tmp_path):
    d0 = write_records(rows(), tmp_path / "d0.parquet")
    ev = evidence(tmp_path / "evidence")
    part = evidence_parts(ev)[0]
    before = part.read_bytes()
    with pytest.raises(VersionError, match="is the input"):  # an evidence part, --force or not
        write_version(rows(), part, rule="r", parent=[d0, *evidence_parts(ev)], force=True)
    assert part.read_bytes() == before and not manifest_path(part).exists()
    # x.parquet's manifest is x.manifest.json: writing x.pq would replace it
    write_version(rows(), tmp_path / "x.parquet", rule="r", parent=d0)
    x_manifest = manifest_path(tmp_path / "x.parquet").read_bytes()
    with pytest.raises(VersionError, match=r"x.manifest.json is the manifest of x.parquet, another dataset"):
        write_version(rows(), tmp_path / "x.pq", rule="r", parent=d0, force=True)
    assert manifest_path(tmp_path / "x.parquet").read_bytes() == x_manifest and not (tmp_path / "x.pq").exists()
    (tmp_path / "y.manifest.json").write_text('{"mine": true}\n')  # not a devenus manifest at all
    with pytest.raises(VersionError, match="is not the manifest of a devenus version"):
        write_version(rows(), tmp_path / "y.parquet", rule="r", force=True)
    assert (tmp_path / "y.manifest.json").read_text() == '{"mine": true}\n'
    # a version of this very output: --force replaces it, also one a kill left mismatched
    with pytest.raises(VersionError, match=r"exists \(use --force"):
        write_version(rows(), tmp_path / "x.parquet", rule="r")
    write_records(rows(3), tmp_path / "x.parquet")  # the Parquet no longer matches its manifest
    write_version(rows(), tmp_path / "x.parquet", rule="r", parent=d0, force=True)
    verify_manifest(tmp_path / "x.parquet", parents=[d0])


def test_import_and_hide_labels_refuse_the_same_outputs(tmp_path, capsys):
    raw = tmp_path / "gsm.jsonl"
    raw.write_text("".join(json.dumps({"question": f"What is {i}+{i}?", "answer": f"#### {2 * i}"}) + "\n" for i in range(6)))
    assert main(["import", str(raw), "--out", str(tmp_path / "x.parquet")]) == 0
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    assert main(["import", str(raw), "--out", str(tmp_path / "x.pq"), "--force"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "x.manifest.json is the manifest of x.parquet" in err
    assert main(["data", "hide-labels", str(tmp_path / "x.parquet"), "--labeled-fraction", "0.5",
                 "--out", str(tmp_path / "x.manifest.json"), "--force"]) == 1
    assert "is named as a version's manifest" in capsys.readouterr().err  # the input's manifest is no output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == kept


# ------------------------------------------------------------------------------ a kill mid-write
KILL = """
import os, signal, sys
import devenus.atomic as atomic
import devenus.records.versions as rv
from devenus.records import make_row
real, target = atomic.commit_temp, sys.argv[2]
def commit(tmp, path, **kw):
    if str(path).endswith(target):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(tmp, path, **kw)
atomic.commit_temp = commit
rows = [make_row(data_source='t', index='t/x', source='t', question='q?', ground_truth='1')]
rv.write_version(rows, sys.argv[1], rule='r', force=True, changes=[rv.Change('t/x', 'f', 1, 2, 'new')])
"""


@pytest.mark.parametrize("at, detected", [(".changes.jsonl", False), (".parquet", True), (".manifest.json", True)])
def test_a_kill_before_or_between_the_renames_leaves_no_half_written_file(tmp_path, at, detected):
    """SIGKILL at each rename of a version with changes: before the first, the old version stands
    verified; between two, verify_manifest reports the mismatch; never a half-written file."""
    out = tmp_path / "v.parquet"
    write_version(rows(), out, rule="r", changes=[Change("t/0", "f", 0, 1, "old")])
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    proc = subprocess.run([sys.executable, "-c", KILL, str(out), at], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == -9, proc.stderr
    now = {p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith(".tmp")}
    assert set(now) == set(old)
    if detected:
        with pytest.raises(VersionError, match="does not match its manifest"):
            verify_manifest(out)
    else:
        assert now == old
        verify_manifest(out)
    for name, data in now.items():  # each file is one complete version's, old or new
        if name.endswith(".parquet"):
            read_records(tmp_path / name)
        elif name.endswith(".jsonl"):
            assert all(json.loads(line) for line in data.decode().splitlines())
        else:
            assert json.loads(data)["format"] == "devenus.version/2"
    write_version(rows(), out, rule="r", force=True)  # the rerun cleans the dead writer's temp files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.manifest.json", "v.parquet"]
