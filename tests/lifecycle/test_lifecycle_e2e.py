"""``devenus lifecycle`` end to end on the testbed: a round of 2 steps of TraPO v2 through verl's trainer
(CPU backend), probes after every step, the transition to D(1), reports. Kept minimal: 16 rows, 4 prompts
x 4 rollouts, 4 held-out questions per split. Round 1 would train the same way on another file, so it is
not launched: its run (overrides and D(1)) goes through every check ``devenus.train`` makes before Ray
starts. This is also the default suite's end-to-end run of a refinement method (TraPO v2's admission) with
its evidence; tests/adapters/verl/test_refine_e2e.py trains every refinement method and resumes it
(extended)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml


@pytest.mark.slow
def test_a_round_on_the_testbed_and_the_next_rounds_setup(base_testbed, tmp_path):
    from devenus.adapters.verl.cpu.launch import cpu_overrides
    from devenus.adapters.verl.train import preflight
    from devenus.lifecycle.config import load_config
    from devenus.lifecycle.run import data_path, round_dir, round_run_config
    from devenus.records.evidence import read_evidence
    from devenus.records.io import read_records
    from devenus.records.versions import verify_manifest
    from devenus.runs import read_metrics
    from devenus.runs.testbed import overrides

    cfg = {"out_dir": str(tmp_path / "out"), "rounds": 1, "method": "trapo2", "steps_per_round": 2,
           "method_config": {"min_pass_rate": 0.0, "min_slope": -1.0, "slope_probes": 2, "min_probes": 1,
                             "min_answered": 1},
           "data": {"testbed": "semi", "rows": 16, "fraction": 0.5},
           "train": {"prompts_per_step": 4, "rollouts_per_prompt": 4, "val_rows": 4, "val_n": 1,
                     "probe_every_k_steps": 1, "probe_sample_size": 4},
           "transition": {"thresholds": {"min_pass_rate": 0.0, "min_slope": -1.0, "min_answered": 1}}}
    path = tmp_path / "lifecycle.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "devenus.cli", "lifecycle", str(path)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = tmp_path / "out"
    r0 = json.loads((out / "round-0" / "report.json").read_text())
    print(f"\nlifecycle 1 round x 2 steps: {wall:.0f} s; round {r0['round_wall_s']} s; probe s "
          f"{json.loads((out / 'round-0' / 'train.json').read_text())['probe_seconds']}")
    print((out / "report.md").read_text())
    assert r0["before"]["rows"] == 16 and r0["before"]["unlabeled"] == 8
    assert r0["transition"]["proposals"] >= 1 and r0["transition"]["accepted"] >= 1  # loose thresholds: promotions
    assert r0["after"]["labeled"] == r0["before"]["labeled"] + r0["transition"]["accepted"]
    assert r0["transition"]["precision"] is not None  # hidden answers of the testbed judge the changes
    assert set(r0["held_out"]) >= {"ID", "OOD"}
    d0, d1 = out / "data" / "d0.parquet", out / "data" / "d1.parquet"
    verify_manifest(str(d1), [str(d0)])
    ev = read_evidence(out / "round-0" / "train" / "checkpoints" / "evidence")
    assert {e["kind"] for e in ev} >= {"visit", "probe", "proposal"} and {e["round"] for e in ev} == {0}
    assert {e["step"] for e in ev if e["kind"] == "visit"} == {1, 2}  # evidence written at every step
    steps = [m for m in read_metrics(sorted((out / "round-0" / "train" / "metrics").glob("*.jsonl"))) if m["step"] > 0]
    assert [m["step"] for m in steps if "timing_s/step" in m] == [1, 2]
    for m in (m for m in steps if "timing_s/step" in m):  # S_a decided in verl's step, the method's own metrics
        assert "devenus/groups/admitted" in m and any(k.startswith("devenus/trapo2/") for k in m), sorted(m)

    # round 1: the run the lifecycle would launch on D(1), through devenus.train's checks (D(1) against the
    # record contract and TraPO v2's data needs, the method config, verl's own config rules)
    lc = load_config(path)
    run_cfg = round_run_config(lc, 1, data_path(lc, 1))
    config = preflight([*cpu_overrides(), *overrides(base_testbed, (round_dir(lc, 1) / "train").resolve(), run_cfg)])
    assert config.data.train_files == str(d1) and config.devenus.round == 1
    assert config.devenus.method == "trapo2" and config.devenus.method_config.min_probes == 1
    assert config.devenus.probe.every_k_steps == 1 and config.devenus.probe.sample_size == 4
    rows = read_records(d1)
    assert sum(x["extra_info"]["labeled"] for x in rows) == r0["after"]["labeled"] < len(rows)  # still some to promote

    # rerun: the round is complete, nothing trains
    t0 = time.perf_counter()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and again.stdout.count("complete, skipped") == 1
    assert time.perf_counter() - t0 < 60
