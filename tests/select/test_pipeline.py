"""``devenus select run`` end to end on the testbed pool (12 questions x 4 samples, shards of 4): the
output passes the record contract, its manifest matches it and says what was decided; a run killed
twice (during generate, during score) and rerun ends byte-identical to an uninterrupted one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from devenus.records import read_records
from devenus.records.versions import read_manifest, verify_manifest

pytestmark = pytest.mark.slow

CONFIG = {
    "pool": "testbed-pool", "limit": 12, "shard_size": 4,
    "generate": {"samples": 4, "batch_size": 16},
    "score": {"batch_size": 16},
    "route": {"selector": "ratio", "signal": "entropy", "rho_annotate": 0.25, "rho_discard": 0.25},
}


def select(*args, timeout=600):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "devenus", "select", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory, base_testbed):
    from devenus.testbed.pool import build_pool

    build_pool()  # once, before any subprocess (they would otherwise race on the lock)
    p = tmp_path_factory.mktemp("cfg") / "select.yaml"
    p.write_text(yaml.safe_dump(CONFIG))
    return p


@pytest.fixture(scope="module")
def full_run(config_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    r = select("run", str(config_file), "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    return out, r


def test_output_is_a_valid_version_that_says_what_was_decided(full_run):
    out, r = full_run
    assert "wrote" in r.stdout
    sel = out / "selected.parquet"
    rows = read_records(sel)  # validates the record contract
    verify_manifest(sel)
    m = read_manifest(sel)
    pool = read_records(_pool())[:12]
    by_key = {r["extra_info"]["index"]: r for r in pool}
    routing = m.config["routing"]
    assert routing["counts"] == {"annotate": 3, "discard": 3, "weak": 6, "keep": 0}
    assert m.config["route"]["signal"] == "entropy" and m.config["score"]["aggregation"] == "mean"
    assert m.config["generation"]["samples"] == 4 and m.config["model"] == "testbed"
    removed = {c.key for c in m.changes if c.field == "<row>"}
    assert len(removed) == 3 + (len(read_records(_pool())) - 12)  # discarded + never scored (limit)
    assert len(rows) == 9
    annotated = [r for r in rows if r["extra_info"]["label_source"] == "annotated"]
    assert len(annotated) == 3
    for r in annotated:
        assert r["extra_info"]["labeled"] is True
        assert r["reward_model"]["ground_truth"] == by_key[r["extra_info"]["index"]]["simulation"]["hidden_answer"]
    weak = [r for r in rows if r["extra_info"]["label_source"] == "none"]
    assert len(weak) == 6 and all(r["reward_model"]["ground_truth"] == "" and not r["extra_info"]["labeled"] for r in weak)
    # the annotated questions are the most uncertain by the routing signal, the discarded the least
    import pyarrow.parquet as pq

    route = pq.read_table(out / "route" / "shard-00000.parquet").to_pydict()
    u = dict(zip(route["index"], route["u"]))
    dec = dict(zip(route["index"], route["decision"]))
    assert min(u[k] for k in u if dec[k] == "annotate") >= max(u[k] for k in u if dec[k] == "weak")
    assert max(u[k] for k in u if dec[k] == "discard") <= min(u[k] for k in u if dec[k] == "weak")


def _pool():
    from devenus.testbed.pool import build_pool

    return build_pool()


def _kill_when(proc, path: Path, timeout=300):
    t0 = time.time()
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {path} appeared: {proc.stderr.read()[-2000:]}")
        if time.time() - t0 > timeout:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_killed_and_rerun_is_byte_identical(full_run, config_file, tmp_path):
    full, _ = full_run
    out = tmp_path / "resumed"
    cmd = [sys.executable, "-m", "devenus", "select", "run", str(config_file), "--out", str(out), "--no-progress"]
    for marker in (out / "generate" / "shard-00000.parquet", out / "score" / "questions-00000.parquet"):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        _kill_when(proc, marker)
    assert not (out / "selected.parquet").exists()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    files = sorted(p.relative_to(full) for p in full.rglob("*.parquet"))
    assert len(files) == 3 + 6 + 1 + 1  # generate, score (samples + questions), route, selected
    for f in files:
        assert (out / f).read_bytes() == (full / f).read_bytes(), f
    assert (out / "selected.manifest.json").read_bytes() == (full / "selected.manifest.json").read_bytes()


def test_stage_errors_are_one_line(full_run, config_file, tmp_path):
    full, _ = full_run
    r = select("route", str(config_file), "--out", str(tmp_path / "empty"), "--no-progress")
    assert r.returncode == 1 and "run 'devenus select score' before 'route'" in r.stderr
    r = select("score", str(config_file), "--out", str(full), "--set", "generate.samples=2", "--no-progress")
    assert r.returncode == 1 and "made with another config" in r.stderr
    r = select("materialize", str(config_file), "--out", str(full), "--no-progress")
    assert r.returncode == 1 and "exists (use --force" in r.stderr


def test_a_run_refused_for_its_pool_leaves_nothing_and_the_corrected_rerun_succeeds(config_file, tmp_path):
    import pyarrow.parquet as pq

    from devenus.records import write_records
    from devenus.records.schema import records_schema

    pool, out = tmp_path / "pool.parquet", tmp_path / "run"
    pq.write_table(records_schema().empty_table(), str(pool))  # a bad pool: no rows
    r = select("run", str(config_file), "--set", f"pool={pool}", "--out", str(out), "--no-progress")
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"error: the pool {pool} has no rows: nothing to select (import or choose a non-empty pool)"], r.stderr
    assert not out.exists()
    write_records(read_records(_pool())[:8], pool)  # corrected in place, rerun into the same folder
    r = select("run", str(config_file), "--set", f"pool={pool}", "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(read_records(out / "selected.parquet")) == 8 - read_manifest(out / "selected.parquet").counts["removed_rows"]


def test_triage_on_the_scored_run(full_run, config_file, tmp_path):
    """Route the already-scored run again with probe-calibrated triage: the probes are annotated
    (simulation truth), keep their labels through materialize, and the manifest holds the calibration."""
    import shutil

    out = tmp_path / "triage"
    shutil.copytree(full_run[0], out)
    # the same run, routed by triage: route: holds the triage router's keys (the ratio router's would be refused)
    triage_file = tmp_path / "triage.yaml"
    triage_file.write_text(yaml.safe_dump({**CONFIG, "route": {"selector": "triage", "signal": "entropy",
                                                                "min_probes": 6, "window": 3}}))
    r = select("route", str(config_file), "--out", str(out), "--set", "route.selector=triage", "--no-progress")
    assert r.returncode == 1 and "route.rho_annotate is not a key of the 'triage' router" in r.stderr, r.stderr[-3000:]
    r = select("route", str(triage_file), "--out", str(out), "--force", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    r = select("materialize", str(triage_file), "--out", str(out), "--force", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    m = read_manifest(out / "selected.parquet")
    routing = m.config["routing"]
    assert routing["selector"] == "triage" and len(routing["probe_keys"]) == 6
    assert set(routing["thresholds"]) == {"t_discard", "t_annotate"} and len(routing["calibration_curve"]["u"]) == 4
    rows = {r["extra_info"]["index"]: r for r in read_records(out / "selected.parquet")}
    pool = {r["extra_info"]["index"]: r for r in read_records(_pool())[:12]}
    for k in routing["probe_keys"]:
        assert rows[k]["extra_info"]["label_source"] == "annotated"
        assert rows[k]["reward_model"]["ground_truth"] == pool[k]["simulation"]["hidden_answer"]


def test_report(full_run, config_file, tmp_path):
    import json

    r = select("report", str(config_file), "--out", str(full_run[0]), "--report-dir", str(tmp_path / "rep"), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["truth"] == "simulation" and rep["questions"] == 12
    assert {"consistency", "entropy", "self_certainty", "coe_c"} <= set(rep["signals"])
    for s in rep["signals"].values():
        assert 0.0 <= s["auroc_wrong_majority"] <= 1.0 or s["auroc_wrong_majority"] != s["auroc_wrong_majority"]
        z = s["zero_variance"]  # the other question a signal answers, with its class counts
        assert 0.0 <= z["auroc"] <= 1.0 or "note" in z
        assert sum(s["classes"].values()) == sum(z["classes"].values()) == s["questions"]
    assert rep["routing"]["counts"]["annotate"] == 3
    pngs = sorted(p.name for p in (tmp_path / "rep").glob("*.png"))
    assert "auroc.png" in pngs and "routing.png" in pngs and "calibration_entropy.png" in pngs
    assert "AUROC" in r.stdout
