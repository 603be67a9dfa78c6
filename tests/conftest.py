"""Shared fixtures. Heavy artefacts (the default testbed) are built once per machine and cached.

Helper modules: a test imports those of its own folder as siblings (``from batches import rollouts``:
pytest puts a test's folder on sys.path, tests/ not being a package); a helper another folder's tests need
is a fixture here. No test edits sys.path."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    # The CI machine is effectively one core: one thread is faster and steadier.
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def base_testbed():
    """The default CPU testbed (built on first use, then read from the cache: same one the demo uses)."""
    from devenus.testbed import build_testbed

    return build_testbed()


@pytest.fixture(scope="session")
def transition_inputs():
    """tests/transitions/fixtures.py (``make_dataset``: a D(k); ``make_evidence``: proposals of both offline
    rules), for the tests of the lifecycle and the experiment runner."""
    spec = importlib.util.spec_from_file_location("transition_inputs", TESTS / "transitions" / "fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
