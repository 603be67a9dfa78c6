"""The suite's own layout, which scripts/test.sh relies on: where the `timing` tests live, and that the
default suite keeps an end-to-end run through verl for every capability while `extended` holds the rest
(scripts/test.sh prints how many verl trainers the default suite launched)."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SCRIPT = TESTS.parent / "scripts" / "test.sh"

#: capability -> the test file whose end-to-end run the default suite (and CI) keeps: one run per capability,
#: a launch proving two where its oracles stay exact (the runner's arm trains on redrawn label noise)
DEFAULT_E2E = {
    "weak supervision (TTRL's votes on N, training on M) through devenus.train": "adapters/verl/test_votes_e2e.py",
    "a refinement method (TraPO v2's admission) with its evidence and probes, a transition, the lifecycle":
        "lifecycle/test_lifecycle_e2e.py",
    "active selection; its output passes the training run's setup checks": "select/test_train_e2e.py",
    "the experiment runner on real runs, GRPO with validation, redrawn label noise": "experiments/test_runner_e2e.py",
    "dynamic sampling with a resume (the refill cursor)": "adapters/verl/test_sampling_e2e.py",
    "skipping before rollout": "adapters/verl/test_skipping_e2e.py",
    "the collapse guard on a collapsing run": "adapters/verl/test_collapse_e2e.py",
    "a method's own state (TraPO's) identical after a resume": "adapters/verl/test_refine_e2e.py",
}
#: capability -> the module whose runs are all extended, and the fast test that checks its runs' setup instead
SETUP_CHECKED = {
    "every other refinement method's run and resume": ("adapters/verl/test_refine_e2e.py",
                                                 "test_every_methods_run_passes_the_setup_checks"),
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
    for what, (rel, fast) in SETUP_CHECKED.items():
        text = (TESTS / rel).read_text()
        # the setup check is a plain (default-tier) test: no slow or extended marker on it
        head = text[:text.index(f"def {fast}(")].rstrip().splitlines()[-1]
        assert "pytest.mark" not in head and not re.search(r"^pytestmark", text, re.M), f"{rel}::{fast} ({what})"


def test_the_script_runs_extended_tests_only_when_asked():
    script = SCRIPT.read_text()
    assert 'e2e="slow and not extended"' in script and 'e2e="slow"' in script
