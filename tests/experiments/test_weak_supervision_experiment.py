"""The weak-supervision experiment on the runner (no training): every arm builds its method, every
label-free method has both settings, each arm names the baseline its claim is about, and the data
files hide labels as asked."""

import importlib.util
import sys
from pathlib import Path

import pytest

from devenus.online import WeakTrainerInterface

SCRIPT = Path(__file__).parents[2] / "experiments" / "weak_supervision.py"


@pytest.fixture()
def ws(monkeypatch):
    spec = importlib.util.spec_from_file_location("weak_supervision", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "weak_supervision", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_every_arm_builds_its_method_and_names_its_baseline(ws):
    arms = ws.arms()
    names = [a.name for a in arms]
    assert len(names) == len(set(names))
    for a in arms:
        WeakTrainerInterface.get(a.method).build(a.method_config)  # a typo fails here, not after an hour
    label_free = {a.method for a in arms if a.method != "grpo"}
    assert label_free == {"ttrl", "corewarding", "corewarding2", "intuitor", "emrl", "unsupervised"}
    by = {a.name: a for a in arms}
    for m in label_free:
        assert (by[f"{m}@10"].baseline, by[f"{m}@10"].claimed_side) == ("grpo@10", 1)
        assert (by[f"{m}@0"].baseline, by[f"{m}@0"].claimed_side) == ("grpo_full", -1)
    assert by["grpo_full"].baseline == by["grpo@10"].baseline == "base"


def test_the_experiment_plans_paired_runs(ws, tmp_path):
    exp = ws.experiment(tmp_path / "results" / ws.NAME, tmp_path / "work")
    plan = exp.plan([0], ["ttrl@10"])
    assert plan == [("base", 0), ("grpo@10", 0), ("ttrl@10", 0)]  # its baselines, same seed
    assert len(exp.plan([0, 1, 2])) == 3 * (1 + len(ws.arms()))


def test_train_files_hide_labels_per_seed(ws, tmp_path):
    from devenus.records import read_records

    arm = next(a for a in ws.arms() if a.name == "ttrl@10")
    rows = read_records(ws.train_file(arm, 0, tmp_path))
    frac = sum(r["extra_info"]["labeled"] for r in rows) / len(rows)
    assert frac == pytest.approx(0.1, abs=0.01)
    assert ws.train_file(next(a for a in ws.arms() if a.name == "grpo_full"), 0, tmp_path) is None
    pairs = read_records(ws.train_file(next(a for a in ws.arms() if a.name == "corewarding@0"), 0, tmp_path))
    assert not any(r["extra_info"]["labeled"] for r in pairs)
