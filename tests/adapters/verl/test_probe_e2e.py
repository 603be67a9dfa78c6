"""Probe passes end to end through ``python -m devenus.train`` on the testbed: TraPO v2, 3 steps, a probe
after step 2 over the unlabeled pool (4 questions x 4 rollouts), a tiny validation set at the last step.

Shows: probe rows land in the evidence table tagged ``probe`` with the step they ran after, probe/* metrics
appear only on the probe step, and the training metrics of that step are the same kinds as a plain step's.
"""

from __future__ import annotations

import time

import pytest

from devenus.runs.testbed import RunConfig
from e2e import train, train_steps


@pytest.fixture(scope="module")
def data(base_testbed, tmp_path_factory):
    from devenus.records.io import read_records
    from devenus.records.labels import hide_labels
    from devenus.records.versions import write_version

    d = tmp_path_factory.mktemp("probe_data")
    rows = read_records(base_testbed.split("train"))[:8]
    write_version(hide_labels(rows, 0.5, 0), d / "semi.parquet", rule="test")
    write_version(read_records(base_testbed.split("test_id"))[:4], d / "val.parquet", rule="test")
    return d


@pytest.mark.slow
@pytest.mark.extended  # the default suite probes in tests/lifecycle/test_lifecycle_e2e.py
def test_probe_pass_writes_probe_evidence_and_leaves_training_metrics_alone(base_testbed, data, tmp_path):
    from devenus.records.evidence import read_evidence
    from devenus.records.io import read_records

    cfg = RunConfig(method="trapo2", steps=3, prompts_per_step=4, rollouts_per_prompt=4, val_n=1,
                    train_file=str(data / "semi.parquet"), val_before_train=False,
                    extra_overrides=("trainer.test_freq=3", f"data.val_files={data / 'val.parquet'}",
                                     "+devenus.probe.every_k_steps=2", "+devenus.probe.n=4"))
    t0 = time.perf_counter()
    r = train(base_testbed, tmp_path, cfg, timeout=900)
    wall = time.perf_counter() - t0
    assert r.ok, r.tail(60)
    metrics = train_steps(r)
    assert sorted(metrics) == [1, 2, 3]
    unlabeled = {row["extra_info"]["index"] for row in read_records(data / "semi.parquet")
                 if not row["extra_info"]["labeled"]}
    p = metrics[2]
    assert p["probe/questions"] == len(unlabeled) == 4 and p["probe/rollouts"] == 16
    assert p["probe/seconds"] > 0 and p["probe/evidence_rows"] >= 4
    print(f"\nprobe: {p['probe/seconds']:.2f} s ({p['probe/seconds_sync']:.2f} s weight sync) for 4 x 4 rollouts; "
          f"step 2 took {p['timing_s/step']:.2f} s; the run {wall:.0f} s")
    assert not any(k.startswith("probe/") for k in (*metrics[1], *metrics[3]))
    # the probe adds metrics, it takes none away: step 2 has every kind step 1 has (validation is at step 3)
    assert {k for k in metrics[1] if not k.startswith("devenus/trapo2/")} <= set(p)
    assert {k for k in p if not k.startswith("probe/")} - set(metrics[1]) <= {k for k in p if k.startswith("devenus/")}
    assert "val-core/" in " ".join(metrics[3])

    ev = read_evidence(tmp_path / "checkpoints" / "evidence")
    probes = [e for e in ev if e["kind"] == "probe"]
    assert {e["key"] for e in probes} == unlabeled and {e["step"] for e in probes} == {2}
    assert all(e["method"] == "trapo2" and e["round"] == 0 and 0 <= e["majority_pass_rate"] <= 1 for e in probes)
    assert all(e["values"]["probes"] >= 1 for e in probes)  # trapo2 counted each probe as a visit
    assert {e["kind"] for e in ev} >= {"visit", "probe"}
