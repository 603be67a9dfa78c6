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
