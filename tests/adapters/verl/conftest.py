import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import verl_cpu_fixtures  # noqa: E402


@pytest.fixture(scope="session")
def verl_cpu_fx(tmp_path_factory) -> dict:
    """Tiny Qwen3 + byte-level BPE tokenizer, train/val Parquet, reward file (built once)."""
    return verl_cpu_fixtures.build_all(tmp_path_factory.mktemp("verl_cpu_fx"))
