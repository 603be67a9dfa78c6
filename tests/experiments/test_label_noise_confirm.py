"""label_noise_confirm: a replication of label_noise_rho's active-noise claims, the pilot's design arm for
arm on new seeds, and a confirmatory plan whose verdict is not read before every planned seed has finished."""

import json
import sys
from pathlib import Path

from devenus.experiments.definition import EXPERIMENTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import power  # noqa: E402


def test_the_replication_is_the_pilots_design_on_new_seeds():
    pilot, confirm = EXPERIMENTS.get("label_noise_rho"), EXPERIMENTS.get("label_noise_confirm")
    arms = {a.name: a for a in pilot.arms}
    assert [a.name for a in confirm.arms] == ["grpo@active0.9", "olr@active0.9", "grpo@active0.5", "olr@active0.5"]
    assert all(a == arms[a.name] for a in confirm.arms)  # method, config, baseline, claimed side
    assert confirm.budget == pilot.budget and confirm.train_file is pilot.train_file
    assert confirm.seeds == tuple(range(5, 13)) and not set(confirm.seeds) & set(pilot.seeds)
    plan = power.PLANS["label_noise_confirm"]
    assert plan.confirmatory and plan.seeds == len(confirm.seeds) and plan.run == confirm.name
    assert {(a, r) for a, r, _ in plan.run_claims} == {(a.name, a.baseline) for a in confirm.arms if a.method == "olr"}


def _write(folder: Path, seeds: range) -> None:
    # olr beats grpo by 0.02 +- 0.005 at active 0.9 and ties at active 0.5 in every seed
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        wobble = 0.004 * (seed % 3 - 1)
        for arm, acc in (("grpo@active0.9", 0.25), ("olr@active0.9", 0.27 + wobble),
                         ("grpo@active0.5", 0.42), ("olr@active0.5", 0.42 + wobble)):
            rec = {"experiment": "label_noise_confirm", "name": arm, "seed": seed, "returncode": 0,
                   "base_model": "w", "per_question": {"ID": {"q": acc}}, "accuracy": {"ID": acc}, "wall_s": 60.0,
                   "arm": {"method": arm.split("@")[0]}, "mechanism": {}}
            (folder / f"{arm}_s{seed}.json").write_text(json.dumps(rec))


def test_a_confirmatory_plan_reads_no_verdict_before_its_planned_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(power, "RESULTS", tmp_path)
    plan = power.PLANS["label_noise_confirm"]
    _write(tmp_path / "label_noise_confirm", range(5, 12))  # 7 of 8 seeds: an interim look
    rows = power.plan_rows(plan)
    assert all("| 7 paired seed(s) | verdict not read (fewer than the planned seeds) | - |" in r for r in rows)
    _write(tmp_path / "label_noise_confirm", range(5, 13))
    active9, active5 = power.plan_rows(plan)
    assert "| +0.020 ± " in active9 and "| reproduced (plan design) |" in active9
    assert "| +0.000 ± " in active5 and "| null within margin (plan design) |" in active5


def test_the_claims_table_does_not_tabulate_a_pilot_twice(tmp_path, monkeypatch):
    # before the replication's runs, its source is the pilot, whose claims already have their own rows
    monkeypatch.setattr(power, "RESULTS", tmp_path)
    (tmp_path / "label_noise_rho").mkdir()
    table = power.claims_table()
    assert "| label_noise_confirm | " in table
    assert all("not yet run under the plan" in r for r in table.splitlines() if r.startswith("| label_noise_confirm"))


def test_the_replications_own_report_decides_on_its_seeds_and_only_describes_the_pilot(tmp_path):
    from devenus.experiments.definitions import label_noise_confirm as c
    from devenus.experiments.runner import Experiment

    def claims_text(recs: dict, pilot_recs: dict) -> str:  # this plan's decision (Holm over its two claims)
        return c.replication_claims(c.NAME, c.SETTINGS, c.SEEDS, recs, pilot_recs)

    _write(tmp_path / "new", range(5, 13))
    _write(tmp_path / "pilot", range(0, 5))
    load = lambda f: Experiment("label_noise_confirm", arms=[], budget={}, results=f).records()  # noqa: E731
    pilot = {k: {**r, "accuracy": {"ID": r["accuracy"]["ID"] - 0.01 * ("olr" in k[0])}} for k, r in load(tmp_path / "pilot").items()}
    rows = [r for r in claims_text(load(tmp_path / "new"), pilot).splitlines() if r.startswith("| olr@")]
    assert rows[0].startswith("| olr@active0.9 vs grpo@active0.9, + | +0.020 ± ") and "(8) |" in rows[0]
    assert "| reproduced | +0.009 ± " in rows[0] and rows[0].endswith("(13) |")  # pilot: 0.01 lower
    assert "| null within margin | -0.011 ± " in rows[1]
    early = claims_text({k: r for k, r in load(tmp_path / "new").items() if k[1] < 12}, pilot)
    assert early.count("not read: 7 of 8 seeds finished") == 2
