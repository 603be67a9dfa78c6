"""bench/select_signal_auroc.py's two targets from the per-question table (the bench's run itself is not
repeated here)."""

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def test_targets_wrong_majority_and_zero_variance_groups():
    spec = importlib.util.spec_from_file_location("select_signal_auroc", ROOT / "bench" / "select_signal_auroc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    y = mod.targets([True, False, False, None, True], [1.0, 0.0, 0.25, None, 0.75])
    assert y["truth"].tolist() == [True, True, True, False, True]  # the fourth has no truth: left out
    assert y["wrong_majority"].tolist() == [False, True, True, False]
    assert y["zero_variance"].tolist() == [True, True, False, False]  # pass rate 0 or 1 only
    assert isinstance(y["zero_variance"], np.ndarray)
