"""``devenus lifecycle`` end to end on the testbed: 2 rounds x 2 steps of TraPO v2 through verl's trainer
(CPU backend), probes after every step, the transition between rounds, reports. Kept minimal: 16 rows,
4 prompts x 4 rollouts, 4 held-out questions per split."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml


@pytest.mark.slow
def test_two_rounds_on_the_testbed(base_testbed, tmp_path):
    from devenus.records.evidence import read_evidence
    from devenus.records.versions import verify_manifest

    cfg = {"out_dir": str(tmp_path / "out"), "rounds": 2, "method": "trapo2", "steps_per_round": 2,
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
    reps = [json.loads((out / f"round-{k}" / "report.json").read_text()) for k in (0, 1)]
    print(f"\nlifecycle 2 rounds x 2 steps: {wall:.0f} s; rounds {[x['round_wall_s'] for x in reps]} s; "
          f"probe s {[json.loads((out / f'round-{k}' / 'train.json').read_text())['probe_seconds'] for k in (0, 1)]}")
    print((out / "report.md").read_text())
    r0, r1 = reps
    assert r0["before"]["rows"] == 16 and r0["before"]["unlabeled"] == 8
    assert r0["transition"]["proposals"] >= 1 and r0["transition"]["accepted"] >= 1  # loose thresholds: promotions
    assert r0["after"]["labeled"] == r0["before"]["labeled"] + r0["transition"]["accepted"] == r1["before"]["labeled"]
    assert r0["transition"]["precision"] is not None  # hidden answers of the testbed judge the changes
    assert set(r0["held_out"]) >= {"ID", "OOD"} and set(r1["held_out"]) >= {"ID", "OOD"}
    verify_manifest(str(out / "data" / "d1.parquet"), [str(out / "data" / "d0.parquet")])
    ev = read_evidence(out / "round-0" / "train" / "checkpoints" / "evidence")
    assert {e["kind"] for e in ev} >= {"visit", "probe", "proposal"} and {e["round"] for e in ev} == {0}
    assert {e["round"] for e in read_evidence(out / "round-1" / "train" / "checkpoints" / "evidence")} == {1}

    # rerun: both rounds are complete, nothing trains
    t0 = time.perf_counter()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0 and again.stdout.count("complete, skipped") == 2
    assert time.perf_counter() - t0 < 60
