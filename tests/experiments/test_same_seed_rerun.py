"""A committed arm run twice with the same seed, code and weights gives the same numbers (the runner keeps the
first run under superseded/rerun/ when a finished result is forced again)."""

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results" / "label_noise_rho"


def _untimed(curves):
    return [{k: v for k, v in c.items() if "timing" not in k} for c in curves]  # timing_s/..., devenus/timing_s/...


@pytest.mark.parametrize("arm", ["grpo_clean", "base"])
def test_a_rerun_with_the_same_seed_gives_the_same_scores_and_curves(arm):
    first = [json.loads(p.read_text()) for p in sorted((RESULTS / "superseded" / "rerun").glob(f"{arm}_s0.*.json"))]
    again = json.loads((RESULTS / f"{arm}_s0.json").read_text())
    assert len(first) == 1
    (first,) = first
    assert (first["code"]["tree"], first["base_model"], first["fingerprint"]) == \
        (again["code"]["tree"], again["base_model"], again["fingerprint"])
    assert first["per_question"] == again["per_question"] and first["accuracy"] == again["accuracy"]
    assert _untimed(first["curves"]) == _untimed(again["curves"])
    assert first["wall_s"] != again["wall_s"]  # two runs, not one file twice


TEN = RESULTS.parent / "ten_percent_labels"
XCHECK = RESULTS.parent / "ten_percent_labels_xcheck"


@pytest.mark.parametrize("arm", ["base", "grpo_full", "grpo@10", "geomin@10"])
def test_the_label_free_pairing_across_code_versions_changes_no_number(arm):
    """plans/label_free.md: ttrl@0 (code 1ebcec5) pairs with grpo_full and base committed at 4f56d80. The
    cross-check reran seed 0 of those arms at 1ebcec5: every held-out score and every per-step metric both
    versions log is the same, so the pairing mixes code versions but not numbers; the newer code only adds
    GeoMin's admission metrics."""
    old = json.loads((TEN / f"{arm}_s0.json").read_text())
    new = json.loads((XCHECK / f"{arm}_s0.json").read_text())
    assert (old["code"]["commit"][:7], new["code"]["commit"][:7]) == ("4f56d80", "1ebcec5")
    assert old["base_model"] == new["base_model"] and old["fingerprint"] == new["fingerprint"]
    assert old["per_question"] == new["per_question"] and old["accuracy"] == new["accuracy"]
    a, b = _untimed(old["curves"]), _untimed(new["curves"])
    assert len(a) == len(b) and [{k: v for k, v in y.items() if k in x} for x, y in zip(a, b)] == a
    added = {k for x, y in zip(a, b) for k in set(y) - set(x)}
    assert added <= {k for k in added if k.startswith("devenus/mechanism/admission/")}
    assert bool(added) == (arm == "geomin@10")
