"""The transition builder: accepted and rejected proposals, the manifest, determinism, refusals, crash safety."""

from __future__ import annotations

import json
import random
import subprocess
import time

import pytest

from fixtures import cli, kill_at, make_dataset, make_evidence

from devenus.records.evidence import EvidenceWriter
from devenus.records.io import read_records
from devenus.records.versions import manifest_path, sha256_file, verify_manifest
from devenus.transitions import TransitionError, build_transition


@pytest.fixture()
def inputs(tmp_path):
    data = make_dataset(tmp_path / "d0.parquet")
    ev = make_evidence(tmp_path / "evidence", data)
    return data, ev


def test_promote_applies_the_latest_proposal_that_passes_the_thresholds(inputs, tmp_path):
    data, ev = inputs
    r = build_transition(data, ev, tmp_path / "d1.parquet", "promote")
    rows = {x["extra_info"]["index"]: x for x in read_records(tmp_path / "d1.parquet")}
    odd = range(1, 40, 2)
    # k1's later proposal (slope 0.05, rate 1.0) decides; every third odd row's rate 0.625 < 0.75 is rejected
    want = {f"k{i}" for i in odd if i % 3 or i == 1}
    got = {k for k, x in rows.items() if x["extra_info"]["label_source"] == "promoted"}
    assert got == want and r.accepted == len(want) and r.rejected == len(odd) - len(want)
    for k in want:
        assert rows[k]["extra_info"]["labeled"] is True and rows[k]["reward_model"]["ground_truth"] == k[1:]
    m = verify_manifest(tmp_path / "d1.parquet", [data])
    assert m.rule == "transition-promote" and m.config["thresholds"] == {"min_pass_rate": 0.75, "min_slope": 0.02, "min_answered": 2}
    ch = [c for c in m.changes if c.key == "k1"]
    assert {c.field for c in ch} == {"reward_model.ground_truth", "extra_info.labeled", "extra_info.label_source"}
    gt = next(c for c in ch if c.field == "reward_model.ground_truth")
    assert (gt.before, gt.after) == ("", "1")
    why = json.loads(gt.why)
    assert why["step"] == 5 and why["proposals"] == 2 and why["values"]["slope"] == 0.05 and why["rule"] == "promote"
    assert {f.key for f in m.refusals} == {f"k{i}" for i in odd} - want
    assert all("min_pass_rate" in f.why for f in m.refusals)
    assert r.precision == 1.0 and r.recall == len(want) / 20
    # a stricter offline threshold rejects k1 (slope 0.05 is not > 0.05)
    r2 = build_transition(data, ev, tmp_path / "d1s.parquet", "promote", thresholds={"min_slope": 0.05})
    assert r2.accepted == len(want) - 1


def test_correct_replaces_labels_and_reports_precision_against_hidden_truth(inputs, tmp_path):
    data, ev = inputs
    r = build_transition(data, ev, tmp_path / "d1.parquet", "correct")
    m = verify_manifest(tmp_path / "d1.parquet", [data])
    rows = {x["extra_info"]["index"]: x for x in read_records(tmp_path / "d1.parquet")}
    changed = {c.key for c in m.changes}
    assert changed == {f"k{i}" for i in range(0, 40, 4)} and r.accepted == 10
    right = sum(rows[k]["reward_model"]["ground_truth"] == k[1:] for k in changed)
    assert right == 6 and r.precision == 0.6 and r.recall == 0.6  # four proposals were wrong
    assert all(rows[k]["extra_info"]["label_source"] == "corrected" for k in changed)


def test_deterministic_and_idempotent(inputs, tmp_path):
    data, ev = inputs
    a, b = tmp_path / "a" / "d1.parquet", tmp_path / "b" / "d1.parquet"
    build_transition(data, ev, a, "promote")
    build_transition(data, ev, b, "promote")
    assert a.read_bytes() == b.read_bytes() and manifest_path(a).read_bytes() == manifest_path(b).read_bytes()
    with pytest.raises(ValueError, match="exists"):
        build_transition(data, ev, a, "promote")
    before = a.read_bytes(), manifest_path(a).read_bytes()
    build_transition(data, ev, a, "promote", force=True)
    assert (a.read_bytes(), manifest_path(a).read_bytes()) == before


def test_refuses_foreign_keys_another_parent_and_missing_provenance(inputs, tmp_path):
    data, ev = inputs
    with EvidenceWriter(ev, method="trapo2") as w:
        w.append("not-a-key", 9, "visit", majority_answer="1", majority_pass_rate=1.0)
    with pytest.raises(TransitionError, match="not-a-key"):
        build_transition(data, ev, tmp_path / "x.parquet", "promote")
    other = make_dataset(tmp_path / "other.parquet", n=41)
    ev2 = make_evidence(tmp_path / "ev2", other)
    with pytest.raises(TransitionError, match="parent hash differs"):
        build_transition(data, ev2, tmp_path / "x.parquet", "promote")
    with pytest.raises(TransitionError, match="dataset-r3.json"):
        build_transition(data, ev2, tmp_path / "x.parquet", "promote", round=3)
    with pytest.raises(TransitionError, match="unknown key min_margin"):
        build_transition(data, ev, tmp_path / "x.parquet", "promote", thresholds={"min_margin": 1})
    assert not (tmp_path / "x.parquet").exists()


def test_cli_prints_the_summary(inputs, tmp_path):
    data, ev = inputs
    out = subprocess.run(cli(str(data), "--evidence", str(ev), "--rule", "correct", "--set", "min_margin=0.9",
                             "--out", str(tmp_path / "d1.parquet")), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 of 10 proposed rows changed" in out.stdout and "10 proposals rejected" in out.stdout
    bad = subprocess.run(cli(str(data), "--evidence", str(tmp_path / "nope"), "--rule", "correct", "--out",
                             str(tmp_path / "d2.parquet")), capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error:") and "dataset-r0.json" in bad.stderr


def test_killed_at_random_points_the_parent_is_intact_and_a_rerun_is_byte_identical(tmp_path):
    data = make_dataset(tmp_path / "d0.parquet", n=1500)
    ev = make_evidence(tmp_path / "evidence", data, n=1500)
    ref = tmp_path / "ref" / "d1.parquet"
    build_transition(data, ev, ref, "promote")
    parent_hash = sha256_file(data)
    out = tmp_path / "d1.parquet"
    cmd = cli(str(data), "--evidence", str(ev), "--rule", "promote", "--out", str(out), "--force")
    t0 = time.perf_counter()
    assert kill_at(cmd, 600) == 0
    full = time.perf_counter() - t0
    rng = random.Random(13)
    finished = 0
    for _ in range(20):
        rc = kill_at(cmd, rng.uniform(0.0, full))
        finished += rc == 0
        assert sha256_file(data) == parent_hash
        if out.exists() and manifest_path(out).exists():
            try:  # a kill may fall between the two renames: detected, never silently accepted
                verify_manifest(out, [data])
            except ValueError as exc:
                assert "does not match" in str(exc)
        build_transition(data, ev, out, "promote", force=True)
        assert out.read_bytes() == ref.read_bytes()
        assert manifest_path(out).read_bytes() == manifest_path(ref).read_bytes()
        verify_manifest(out, [data])
        # the rerun removed the killed writer's temporary files
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".d1.") and p.name.endswith(".tmp")]
    assert finished < 20  # most kills land inside the run


def test_one_evidence_directory_per_dataset_round(inputs, tmp_path):
    from devenus.records.evidence import EvidenceProvenanceError, record_dataset

    data, ev = inputs
    record_dataset(ev, [str(data)], 0)  # the same data again (a resumed run): accepted
    other = make_dataset(tmp_path / "other.parquet", n=12)
    with pytest.raises(EvidenceProvenanceError, match="use another devenus.evidence_dir or devenus.round"):
        record_dataset(ev, [str(other)], 0)
    record_dataset(ev, [str(other)], 1)  # the next round on D(1)
