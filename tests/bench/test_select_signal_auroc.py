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


def test_the_committed_smollm2_picture_marks_pivot_trace_constant_and_keeps_both_aurocs():
    import json

    from devenus.select.report import auroc_bars

    spec = importlib.util.spec_from_file_location("select_signal_auroc", ROOT / "bench" / "select_signal_auroc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = json.loads((ROOT / "bench" / "results" / "select_signal_auroc_smollm2.json").read_text())["result"]
    balance = {"wrong_majority": r["wrong_majority_share"], "zero_variance": r["zero_variance_share"]}
    (wl, _, w), (zl, _, z) = auroc_bars(mod.as_report(r["signals"], balance, r["questions"]))
    assert (wl, zl) == ("wrong majority", "zero-variance group")
    marks = {b["signal"]: (b["mark"], c["mark"]) for b, c in zip(w, z)}
    assert marks.pop("pivot_trace") == ("constant", "constant")  # 0.5 in every resample: it does not vary
    assert set(marks.values()) == {(None, None)} and len(marks) == len(r["signals"]) - 1
    coe_c = next(row for row in r["signals"] if row["signal"] == "coe_c")
    assert [b["auroc"] for b in w + z if b["signal"] == "coe_c"] == [coe_c["wrong_majority"]["auroc"],
                                                                    coe_c["zero_variance"]["auroc"]]
