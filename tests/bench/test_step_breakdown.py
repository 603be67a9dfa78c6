"""bench/step_breakdown.py's plain arm (shared by bench/smollm2_phases.py) at toy size on the testbed's model:
every phase timed and the batch's shape taken from its own generation."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("step_breakdown", ROOT / "bench" / "step_breakdown.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "step_breakdown", mod)
    spec.loader.exec_module(mod)
    return mod


def test_plain_arm_times_every_phase_on_the_given_model_and_rows(bench, base_testbed):
    from devenus.records import read_records

    rows = read_records(base_testbed.split("train"))[:2]
    p = bench.plain_arm(2, 8, rows, 3, 2, 1e-3, base_testbed.model_dir)
    for phase in ("gen", "reward", "old_log_prob", "update_actor", "update_weights", "step", "step_cpu"):
        assert len(p["times"][phase]) == 2 and all(t > 0 for t in p["times"][phase]), phase
    rows_, length, prompt, response = p["shape"]
    assert rows_ == 6 and 0 < response <= 8 and length <= prompt + response
