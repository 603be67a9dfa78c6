"""The weak-supervision experiment's plumbing (no training): every arm builds, results aggregate into a
table with seeds' CIs and paired changes, and a plot."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from devenus.online import WeakTrainerInterface

SCRIPT = Path(__file__).parents[2] / "experiments" / "weak_supervision.py"


@pytest.fixture()
def ws(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("weak_supervision", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "weak_supervision", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results" / "weak_supervision")
    return mod


def test_every_arm_builds_its_method_and_every_label_free_method_has_both_settings(ws):
    arms = ws.arms()
    names = [a.name for a in arms]
    assert len(names) == len(set(names))
    for a in arms:
        WeakTrainerInterface.get(a.method).build(a.method_config)  # a typo fails here, not after an hour
    label_free = {a.method for a in arms if a.method != "grpo"}
    assert label_free == {"ttrl", "corewarding", "corewarding2", "intuitor", "emrl", "unsupervised"}
    for m in label_free:
        assert {f"{m}@0", f"{m}@10"} <= set(names)


def _record(name, seed, id_acc, ood_acc, budget, curves=()):
    val = {"16": {"ID": {"sampled": {"mean": id_acc}}, "OOD": {"sampled": {"mean": ood_acc}}}}
    return {"arm": {"name": name}, "seed": seed, "budget": budget, "returncode": 0, "wall_s": 60.0,
            "validation": val, "curves": list(curves)}


def test_report_pairs_each_run_with_its_seeds_base(ws):
    from dataclasses import asdict

    b = asdict(ws.BUDGET)
    for seed, (base, final) in enumerate([(0.2, 0.5), (0.3, 0.5), (0.25, 0.6)]):
        ws._save(f"base_s{seed}", _record("base", seed, base, 0.3, b))
        curves = [{"step": s, "devenus/target/accuracy": 0.4 + 0.01 * s} for s in range(1, 6)]
        ws._save(f"ttrl@0_s{seed}", _record("ttrl@0", seed, final, 0.35, b, curves))
    failed = _record("grpo_full", 0, 0.0, 0.0, b)
    failed["returncode"], failed["validation"] = 1, {}
    ws._save("grpo_full_s0", failed)
    ws.report()
    table = (ws.RESULTS.parent / "weak_supervision.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| ttrl@0 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "3" and cells[2] == "0.533 ± 0.143"  # Student t with 2 degrees of freedom
    assert cells[4].startswith("+0.283 ± ")  # mean of 0.3, 0.2, 0.35: paired with each seed's own base
    assert cells[5] == "0.430"  # pseudo-label accuracy over the last 5 steps
    assert "| grpo_full | 0 | - | - | - | - | 1 |" in table
    assert (ws.RESULTS.parent / "weak_supervision.png").stat().st_size > 10_000
    assert ws._done("ttrl@0_s1", ws.BUDGET) and not ws._done("grpo_full_s0", ws.BUDGET)
    assert json.loads((ws.RESULTS / "ttrl@0_s1.json").read_text())["seed"] == 1
