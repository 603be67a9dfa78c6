"""``devenus lifecycle``: config validation, and the round bookkeeping (resume, skip, reports) with the
training step replaced by a function that writes evidence like the trainer does. The real training runs
in test_lifecycle_e2e.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devenus.lifecycle.config import LifecycleConfigError, load_config, parse_config
from devenus.lifecycle.run import data_path, evidence_dir, round_dir, run_lifecycle

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "src" / "devenus" / "configs" / "lifecycle" / "testbed.yaml"


def test_the_shipped_testbed_config_loads():
    cfg = load_config(SHIPPED)
    assert cfg.rule == "promote" and cfg.rounds == 2 and cfg.train.probe_every_k_steps == 1


@pytest.mark.parametrize("doc, message", [
    ({}, "out_dir is required"),
    ({"out_dir": "o", "method": "grpo"}, r"method must be one of \['nl_olr2', 'trapo2'\] \(a method that proposes dataset"),
    ({"out_dir": "o", "rounds": 0}, "rounds must be an integer >= 1, got 0"),
    ({"out_dir": "o", "rounds": "2"}, "rounds must be an integer >= 1, got '2'"),
    ({"out_dir": "o", "round": 2}, r"unknown key round \(did you mean rounds\?\)"),
    ({"out_dir": "o", "train": {"steps": 2}}, "unknown key train.steps"),
    ({"out_dir": "o", "train": {"rollouts_per_prompt": 1}}, "train.rollouts_per_prompt must be an integer >= 2"),
    ({"out_dir": "o", "data": {"testbed": "clean"}}, r"data.testbed must be one of \['semi', 'noisy'\]"),
    ({"out_dir": "o", "data": {"fraction": 1.0}}, "data.fraction must be a number > 0.0 and < 1.0"),
    ({"out_dir": "o", "transition": {"thresholds": {"min_margin": 0.1}}}, "transition.thresholds: rule 'promote': unknown key min_margin"),
    ({"out_dir": "o", "transition": {"thresholds": {"min_pass_rate": float("nan")}}}, "transition.thresholds: rule 'promote': min_pass_rate must be a finite number"),
    ({"out_dir": "o", "train": {"overrides": "a=b"}}, "train.overrides must be a list of strings"),
    ({"out_dir": "o", "method_config": {"min_pas_rate": 0.5}}, r"method_config: .*did you mean \+devenus.method_config.min_pass_rate"),
    ({"out_dir": "o", "method": "nl_olr2", "transition": {"thresholds": {"min_margin": 1.5}}},
     "transition.thresholds: rule 'correct': min_margin must be a number >= 0.0 and <= 1.0"),
])
def test_config_errors_name_the_key(doc, message):
    with pytest.raises(LifecycleConfigError, match=message):
        parse_config(doc)


@pytest.mark.parametrize("text, message", [
    ("out_dir: o\nmethod: nl_olr2\nsteps_per_round: 0\n", "steps_per_round must be an integer >= 1"),
    ("out_dir: o\ndata: {rows: [1\n", "not valid YAML/JSON"),
    ("- out_dir\n", "expected a mapping of config keys, got list"),
])
def test_a_bad_config_is_one_line_from_the_cli(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    r = subprocess.run([sys.executable, "-m", "devenus.cli", "lifecycle", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert message in r.stderr and str(bad) in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.fixture
def d0(tmp_path, transition_inputs) -> Path:
    return transition_inputs.make_dataset(tmp_path / "d.parquet", n=12)


def fake_train(calls: list):
    """Stands in for devenus.train in the bookkeeping test only: records the call and writes round k's
    evidence the way the trainer does (provenance + trapo2 proposals promoting every unlabeled row with
    its hidden answer, except k3 which gets a wrong one)."""
    from devenus.records.evidence import EvidenceWriter
    from devenus.records.io import read_records
    from devenus.records.evidence import record_dataset

    def train(cfg, k, data, rd):
        calls.append(k)
        ev = evidence_dir(cfg, k)
        record_dataset(ev, [str(data)], k)
        with EvidenceWriter(ev, method="trapo2", round=k) as w:
            for r in read_records(data):
                key = r["extra_info"]["index"]
                if r["extra_info"]["labeled"]:
                    continue
                after = "wrong" if key == "k3" else r["simulation"]["hidden_answer"]
                w.append(key, 1, "probe", majority_answer=after, majority_pass_rate=0.9)
                if k == 0 or key in ("k5",):  # round 1 sees only k5 again: one more promotion there
                    w.append(key, 1, "proposal", majority_answer=after, majority_pass_rate=0.9,
                             values={"rule": "promote", "field": "reward_model.ground_truth", "before": "",
                                     "after": after, "slope": 0.1, "probes": 2, "answered": 2})
        return {"held_out": {"ID": 0.5 + k / 10}, "wall_s": 1.0}
    return train


def test_rounds_chain_datasets_write_reports_and_skip_what_is_done(tmp_path, d0):
    src = d0
    cfg = parse_config({"out_dir": str(tmp_path / "out"), "rounds": 2, "data": {"path": str(src)}})
    calls: list = []
    # round 0 promotes every unlabeled row except those held back below: split k5 into round 1
    train = fake_train(calls)

    def train_holding_k5(cfg, k, data, rd):
        out = train(cfg, k, data, rd)
        if k == 0:  # drop k5's proposal from round 0 so that round 1 has one to accept
            from devenus.records.evidence import EvidenceWriter
            with EvidenceWriter(evidence_dir(cfg, 0), method="trapo2", round=0) as w:
                w.append("k5", 1, "proposal", majority_answer="5", majority_pass_rate=0.1,
                         values={"rule": "promote", "field": "reward_model.ground_truth", "before": "",
                                 "after": "5", "slope": 0.1, "probes": 2, "answered": 2})
        return out

    reps = run_lifecycle(cfg, train=train_holding_k5, log=lambda s: None)
    assert calls == [0, 1] and [r["round"] for r in reps] == [0, 1]
    r0, r1 = reps
    # 12 rows, 6 unlabeled (odd keys): k5 refused in round 0 (pass rate 0.1), the other 5 promoted, k3 wrongly
    assert r0["before"]["unlabeled"] == 6 and r0["transition"]["accepted"] == 5
    assert r0["after"]["unlabeled"] == 1 and r0["after"]["source/promoted"] == 5
    assert r0["transition"]["precision"] == pytest.approx(4 / 5) and r0["transition"]["recall"] == pytest.approx(4 / 6)
    assert r1["data"] == "d1.parquet" and r1["transition"]["accepted"] == 1 and r1["after"]["unlabeled"] == 0
    assert r1["held_out"] == {"ID": 0.6}
    assert data_path(cfg, 2).exists() and json.loads((round_dir(cfg, 1) / "report.json").read_text()) == r1
    md = (Path(cfg.out_dir) / "report.md").read_text()
    assert "| 0 | d0.parquet | 6 / 12 | 6 | 5 | 0.800 | 0.667 | 11 / 12 | 0.500 |" in md

    # a rerun trains nothing and returns the same reports
    again = run_lifecycle(cfg, train=train_holding_k5, log=lambda s: None)
    assert calls == [0, 1] and again == reps

    # a round killed after training (no report yet): the rerun reuses the training, redoes the transition
    # byte-identically, and does not touch round 0
    d2 = data_path(cfg, 2).read_bytes()
    (round_dir(cfg, 1) / "report.json").unlink()
    data_path(cfg, 2).unlink()
    third = run_lifecycle(cfg, train=train_holding_k5, log=lambda s: None)
    assert calls == [0, 1] and data_path(cfg, 2).read_bytes() == d2
    assert [r["transition"] for r in third] == [r["transition"] for r in reps]

    # a round killed during training (no train.json): it trains again
    for p in (round_dir(cfg, 1) / "report.json", round_dir(cfg, 1) / "train.json"):
        p.unlink()
    run_lifecycle(cfg, train=train_holding_k5, log=lambda s: None)
    assert calls == [0, 1, 1]
