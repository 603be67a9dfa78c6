"""The weak-supervision experiment on the runner (no training): every arm builds its method, every
label-free method has both settings, each arm names the baseline its claim is about, and the data
files hide labels as asked."""

import pytest

from devenus.experiments.definitions import weak_supervision as ws
from devenus.online import WeakTrainerInterface


def test_every_arm_builds_its_method_and_names_its_baseline():
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


def test_the_experiment_plans_paired_runs(tmp_path):
    exp = ws.DEFINITION.experiment(tmp_path / "results" / ws.NAME, tmp_path / "work")
    plan = exp.plan([0], ["ttrl@10"])
    assert plan == [("base", 0), ("grpo@10", 0), ("ttrl@10", 0)]  # its baselines, same seed
    assert len(exp.plan([0, 1, 2])) == 3 * (1 + len(ws.arms()))


def test_train_files_hide_labels_per_seed(tmp_path):
    from devenus.records import read_records

    exp = ws.DEFINITION.experiment(tmp_path / "results" / ws.NAME, tmp_path)
    arm = next(a for a in ws.arms() if a.name == "ttrl@10")
    rows = read_records(ws.train_file(arm, 0, exp))
    frac = sum(r["extra_info"]["labeled"] for r in rows) / len(rows)
    assert frac == pytest.approx(0.1, abs=0.01)
    assert ws.train_file(next(a for a in ws.arms() if a.name == "grpo_full"), 0, exp) is None
    pairs = read_records(ws.train_file(next(a for a in ws.arms() if a.name == "corewarding@0"), 0, exp))
    assert not any(r["extra_info"]["labeled"] for r in pairs)
