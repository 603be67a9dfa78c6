"""The suite's own layout, which scripts/test.sh relies on: where the `timing` tests live, and that the
default suite keeps an end-to-end run through verl for every capability while `extended` holds the rest."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SCRIPT = TESTS.parent / "scripts" / "test.sh"

#: capability -> the test files whose end-to-end runs the default suite (and CI) keeps
DEFAULT_E2E = {
    "weak supervision (TTRL's votes) through devenus.train": "adapters/verl/test_votes_e2e.py",
    "training-time refinement, its evidence and a method-state resume": "adapters/verl/test_refine_e2e.py",
    "the lifecycle: probes, a transition, training on D(1)": "lifecycle/test_lifecycle_e2e.py",
    "active selection, then training on the selected version": "select/test_train_e2e.py",
    "the experiment runner on real runs": "experiments/test_runner_e2e.py",
}


def _marks(text: str) -> set[str]:
    return set(re.findall(r"pytest\.mark\.(\w+)", text))


def test_timing_tests_live_only_where_the_script_collects_them():
    with_timing = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                         if "timing" in _marks(p.read_text()))
    assert with_timing and all(p.startswith("verify/") for p in with_timing), with_timing
    assert '-m "timing and not slow" tests/verify' in SCRIPT.read_text()


def test_every_capability_keeps_an_end_to_end_run_in_the_default_suite():
    for what, rel in DEFAULT_E2E.items():
        text = (TESTS / rel).read_text()
        assert "slow" in _marks(text), f"{rel} ({what}) has no end-to-end run"
        # a whole file marked extended would leave the capability out of CI
        assert not re.search(r"^pytestmark\s*=.*extended", text, re.M), f"{rel} ({what}) is extended as a whole"
    refine = (TESTS / DEFAULT_E2E["training-time refinement, its evidence and a method-state resume"]).read_text()
    assert re.search(r'^DEFAULT = "\w+"', refine, re.M)  # one method stays in the default suite


def test_the_script_runs_extended_tests_only_when_asked():
    script = SCRIPT.read_text()
    assert 'e2e="slow and not extended"' in script and 'e2e="slow"' in script
