"""Fixtures of the verl adapter's tests. Helper modules of this folder (e2e.py, verl_cpu_fixtures.py, ...)
import as siblings: pytest puts a test's (and a conftest's) own folder on sys.path, tests/ not being a package."""

import pytest

import verl_cpu_fixtures


@pytest.fixture(scope="session")
def verl_cpu_fx(tmp_path_factory) -> dict:
    """Tiny Qwen3 + byte-level BPE tokenizer, train/val Parquet, reward file (built once)."""
    return verl_cpu_fixtures.build_all(tmp_path_factory.mktemp("verl_cpu_fx"))
