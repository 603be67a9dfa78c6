"""Shared fixtures. Heavy artefacts (the default testbed) are built once per machine and cached."""

from __future__ import annotations

import os

import pytest

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
