"""Dataset versions: Parquet + manifest, deterministic, crash-safe, one output rule."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys

import pytest

import devenus.atomic as atomic
import devenus.records.versions as rv
from devenus.records import RecordError, make_row, read_records, write_records
from devenus.records.versions import (
    ROW_REMOVED,
    Change,
    Refusal,
    VersionError,
    VersionWriter,
    check_output,
    manifest_path,
    read_manifest,
    row_changes,
    verify_manifest,
    write_version,
)


def rows(n=4, start=0):
    return [make_row(data_source="t", index=f"t/{i}", source="t", question=f"What is {i}+{i}?",
                     ground_truth=str(2 * i), simulation={"hidden_answer": str(2 * i), "noise": "none"})
            for i in range(start, start + n)]


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_manifest_holds_hashes_rule_config_counts_and_every_change(tmp_path):
    d0 = tmp_path / "d0.parquet"
    write_records(rows(), d0)
    new = copy.deepcopy(rows()[:3])
    new[1]["reward_model"]["ground_truth"] = "99"
    changes = row_changes(rows()[1], new[1], "evidence: majority 99 at 0.9") + [Change("t/3", ROW_REMOVED, "present", "removed", "not selected")]
    m = write_version(new, tmp_path / "d1.parquet", rule="correct", config={"min_ratio": 0.9, "keys": ("a", "b")},
                      parent=d0, changes=changes)
    assert m.path == tmp_path / "d1.manifest.json" == manifest_path(tmp_path / "d1.parquet")
    assert m.output == {"name": "d1.parquet", "sha256": sha(tmp_path / "d1.parquet"), "rows": 3, "labeled": 3}
    assert [(p.name, p.sha256, p.rows) for p in m.parents] == [("d0.parquet", sha(d0), 4)]
    assert m.rule == "correct" and m.config == {"min_ratio": 0.9, "keys": ["a", "b"]}
    assert m.counts == {"rows_in": 4, "rows_out": 3, "changed_rows": 1, "removed_rows": 1, "changes": 2, "refused": 0}
    assert m.changes == [Change("t/1", "reward_model.ground_truth", "2", "99", "evidence: majority 99 at 0.9"),
                         Change("t/3", ROW_REMOVED, "present", "removed", "not selected")]
    text = m.path.read_text()
    assert str(tmp_path) not in text  # no absolute paths, no clock: nothing host- or time-dependent
    assert verify_manifest(tmp_path / "d1.parquet", parents=[d0]) == m
    assert read_records(tmp_path / "d1.parquet")[1]["reward_model"]["ground_truth"] == "99"


def test_same_inputs_give_byte_identical_files(tmp_path):
    out = []
    for sub in ("a", "b"):
        d = tmp_path / sub
        d.mkdir()
        write_version(rows(), d / "v.parquet", rule="r", config={"x": 1},
                      changes=[Change("t/0", "extra_info.labeled", True, False, "why")],
                      refusals=[Refusal("line 3", "answer", "a bool")])
        out.append(((d / "v.parquet").read_bytes(), (d / "v.manifest.json").read_bytes()))
    assert out[0] == out[1]


def test_streaming_writer_validates_across_batches(tmp_path):
    with VersionWriter(tmp_path / "s.parquet", rule="stream") as w:
        w.write(rows(3))
        w.write(rows(3, start=3))
    assert len(read_records(tmp_path / "s.parquet")) == 6 and w.manifest.output["rows"] == 6
    with pytest.raises(RecordError, match="row 4 .*duplicate of an earlier row"):
        with VersionWriter(tmp_path / "dup.parquet", rule="stream") as w:
            w.write(rows(3))
            w.write(rows(2, start=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.manifest.json", "s.parquet"]  # nothing of dup


@pytest.mark.parametrize("field, value", [("difficulty", 3.5), ("difficulty", True), ("family", b"algebra")])
def test_rows_are_checked_before_arrow_could_coerce_them(tmp_path, field, value):
    # pyarrow writes 3.5 into an int64 column as 3, and bytes into a string column as text: a row that
    # does not read back from its table as it went in is named, so such a row is refused, not rewritten
    bad = rows(2)
    bad[1]["extra_info"][field] = value
    with pytest.raises(RecordError, match=f"row 1 .*extra_info.{field}: expected a (int|str) or None"):
        write_version(bad, tmp_path / "v.parquet", rule="r")
    assert list(tmp_path.iterdir()) == []


def _old_version(tmp_path):
    out = tmp_path / "v.parquet"
    write_version(rows(), out, rule="r")
    return out, out.read_bytes(), manifest_path(out).read_bytes()


def test_failure_between_parquet_and_manifest_keeps_the_old_version(tmp_path, monkeypatch):
    out, old_parquet, old_manifest = _old_version(tmp_path)
    real = atomic.commit_temp

    def die_on_manifest(tmp, path, **kw):
        if str(path).endswith(".manifest.json"):
            raise OSError(28, "No space left on device")
        return real(tmp, path, **kw)

    # the manifest's rename fails after the Parquet's: the old Parquet is put back
    monkeypatch.setattr(atomic, "commit_temp", die_on_manifest)
    with pytest.raises(OSError):
        write_version(rows(2), out, rule="r", force=True)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.manifest.json", "v.parquet"]  # no temp files left
    assert out.read_bytes() == old_parquet and manifest_path(out).read_bytes() == old_manifest
    verify_manifest(out)


def test_failure_while_writing_keeps_the_old_version_exactly(tmp_path, monkeypatch):
    out, old_parquet, old_manifest = _old_version(tmp_path)

    def die(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rv.json, "dumps", die)  # the manifest text cannot be built
    with pytest.raises(OSError):
        write_version(rows(2), out, rule="r", force=True)
    assert out.read_bytes() == old_parquet and manifest_path(out).read_bytes() == old_manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.manifest.json", "v.parquet"]


def test_a_kill_between_the_renames_is_detected(tmp_path):
    """A real SIGKILL after the Parquet rename, before the manifest's: the reader sees the mismatch,
    and the next write cleans the dead writer's temp files."""
    out, _, old_manifest = _old_version(tmp_path)
    code = f"""
import os, signal
import devenus.atomic as atomic
import devenus.records.versions as rv
from devenus.records import make_row
real = atomic.commit_temp
def commit(tmp, path, **kw):
    if str(path).endswith('.manifest.json'):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(tmp, path, **kw)
atomic.commit_temp = commit
rows = [make_row(data_source='t', index='t/x', source='t', question='q?', ground_truth='1')]
rv.write_version(rows, {str(out)!r}, rule='r', force=True)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr
    assert manifest_path(out).read_bytes() == old_manifest
    with pytest.raises(VersionError, match="does not match its manifest"):
        verify_manifest(out)
    stale = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert stale, "the killed writer left its manifest temp file"
    write_version(rows(), out, rule="r", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.manifest.json", "v.parquet"]
    verify_manifest(out)


def test_stale_temp_of_a_live_writer_is_kept(tmp_path):
    out = tmp_path / "v.parquet"
    live = tmp_path / f".v.parquet.devenus-{os.getppid()}-abc.tmp"
    dead = tmp_path / ".v.parquet.devenus-999999999-abc.tmp"
    foreign = tmp_path / ".v.parquet.other.tmp"
    for p in (live, dead, foreign):
        p.write_bytes(b"x" * 10)
    write_records(rows(), out)
    assert live.exists() and foreign.exists() and not dead.exists()


def test_output_rule(tmp_path):
    d0 = tmp_path / "d0.parquet"
    write_records(rows(), d0)
    with pytest.raises(VersionError, match="is the input"):
        check_output(d0, [d0], force=True)
    with pytest.raises(VersionError, match="is the input"):
        check_output(tmp_path / "sub" / ".." / "d0.parquet", [d0], force=True)
    os.symlink(d0, tmp_path / "link.parquet")
    with pytest.raises(VersionError, match="is the input"):
        check_output(tmp_path / "link.parquet", [d0], force=True)
    with pytest.raises(VersionError, match=r"exists \(use --force"):
        check_output(d0, [])
    assert check_output(d0, [], force=True) == d0
    with pytest.raises(VersionError, match="is a directory"):
        check_output(tmp_path, [], force=True)
    with pytest.raises(VersionError, match="is the input"):
        write_version(rows(), d0, rule="r", parent=d0, force=True)


def test_verify_and_read_errors(tmp_path):
    out = tmp_path / "v.parquet"
    write_version(rows(), out, rule="r")
    with pytest.raises(VersionError, match="no manifest"):
        read_manifest(tmp_path / "other.parquet")
    other = tmp_path / "o.parquet"
    write_records(rows(1), other)
    with pytest.raises(VersionError, match="is not a parent"):
        verify_manifest(out, parents=[other])
    m = json.loads(manifest_path(out).read_text())
    m["format"] = "something else"
    manifest_path(out).write_text(json.dumps(m))
    with pytest.raises(VersionError, match="is not a devenus.version manifest"):
        read_manifest(out)


def test_row_changes_lists_each_differing_field():
    a = rows(1)[0]
    b = copy.deepcopy(a)
    b["reward_model"]["ground_truth"] = ""
    b["extra_info"]["labeled"] = False
    b["extra_info"]["label_source"] = "none"
    assert [(c.field, c.before, c.after) for c in row_changes(a, b, "hidden")] == [
        ("extra_info.label_source", "gold", "none"),
        ("extra_info.labeled", True, False),
        ("reward_model.ground_truth", "0", ""),
    ]
    assert row_changes(a, copy.deepcopy(a), "same") == []
