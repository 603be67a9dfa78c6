"""inactive_noise_confirm: label_noise_rho's inactive-noise claim at rho 0.5, the pilot's design arm for arm on
new seeds, a confirmatory plan whose verdict is not read before every planned seed has finished."""

import json
import sys
from pathlib import Path

from devenus.experiments.definition import EXPERIMENTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import power  # noqa: E402


def test_the_replication_is_the_pilots_design_on_new_seeds():
    pilot, confirm = EXPERIMENTS.get("label_noise_rho"), EXPERIMENTS.get("inactive_noise_confirm")
    arms = {a.name: a for a in pilot.arms}
    assert [a.name for a in confirm.arms] == ["grpo@inactive0.5", "olr@inactive0.5"]
    assert all(a == arms[a.name] for a in confirm.arms)  # method, config, baseline, claimed side
    assert confirm.budget == pilot.budget and confirm.train_file is pilot.train_file
    assert confirm.seeds == tuple(range(5, 15)) and not set(confirm.seeds) & set(pilot.seeds)
    plan = power.PLANS["inactive_noise_confirm"]
    assert plan.confirmatory and plan.seeds == len(confirm.seeds) and plan.run == confirm.name
    assert plan.run_claims == (("olr@inactive0.5", "grpo@inactive0.5", 1),)


def _write(folder: Path, seeds, gain: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        wobble = 0.004 * (seed % 3 - 1)
        for arm, acc in (("grpo@inactive0.5", 0.52), ("olr@inactive0.5", 0.52 + gain + wobble)):
            rec = {"experiment": "inactive_noise_confirm", "name": arm, "seed": seed, "returncode": 0,
                   "base_model": "w", "per_question": {"ID": {"q": acc}}, "accuracy": {"ID": acc}, "wall_s": 60.0,
                   "arm": {"method": arm.split("@")[0]}, "mechanism": {}}
            (folder / f"{arm}_s{seed}.json").write_text(json.dumps(rec))


def _load(folder: Path) -> dict:
    from devenus.experiments.runner import Experiment

    return Experiment("inactive_noise_confirm", arms=[], budget={}, results=folder).records()


def test_the_report_decides_on_the_new_seeds_alone_and_only_once_all_have_finished(tmp_path):
    from devenus.experiments.definitions import inactive_noise_confirm as c
    from devenus.experiments.definitions.label_noise_confirm import replication_claims

    def claims_text(recs: dict, pilot_recs: dict) -> str:  # this plan's decision (one claim)
        return replication_claims(c.NAME, c.SETTINGS, c.SEEDS, recs, pilot_recs)

    _write(tmp_path / "pilot", range(0, 5), 0.0)
    _write(tmp_path / "new", range(5, 14), 0.02)  # 9 of 10 seeds: an interim look reads nothing
    assert "not read: 9 of 10 seeds finished" in claims_text(_load(tmp_path / "new"), _load(tmp_path / "pilot"))
    _write(tmp_path / "new", range(5, 15), 0.02)
    row = next(r for r in claims_text(_load(tmp_path / "new"), _load(tmp_path / "pilot")).splitlines()
               if r.startswith("| olr@"))
    assert row.startswith("| olr@inactive0.5 vs grpo@inactive0.5, + | +0.020 ± ") and "(10) |" in row
    assert "| reproduced | " in row and row.endswith("(15) |")  # the pilot pooled in, as a description
    _write(tmp_path / "new", range(5, 15), 0.0)
    row = next(r for r in claims_text(_load(tmp_path / "new"), _load(tmp_path / "pilot")).splitlines()
               if r.startswith("| olr@"))
    assert "| null within margin | " in row


def test_the_claims_table_reads_no_verdict_before_the_planned_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(power, "RESULTS", tmp_path)
    plan = power.PLANS["inactive_noise_confirm"]
    _write(tmp_path / "inactive_noise_confirm", range(5, 14), 0.02)
    (row,) = power.plan_rows(plan)
    assert "| 9 paired seed(s) | verdict not read (fewer than the planned seeds) | - |" in row
    _write(tmp_path / "inactive_noise_confirm", range(5, 15), 0.02)
    (row,) = power.plan_rows(plan)
    assert "| +0.020 ± " in row and "| reproduced (plan design) |" in row
