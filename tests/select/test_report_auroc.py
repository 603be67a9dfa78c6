"""The report's AUROC picture: each signal's AUROC for a wrong majority with its AUROC for a zero-variance group
beside it, and a constant signal written as ``constant`` (it ranks nothing: no bar, not one at 0.5), on the
committed numbers behind docs/selection/auroc.png and on made-up ones."""

import json
import math
from pathlib import Path

import pytest

from devenus.select.report import auroc_bars, auroc_mark, draw_auroc, summary_lines

pytest.importorskip("matplotlib")
COMMITTED = Path(__file__).resolve().parents[2] / "bench" / "results" / "select_report_testbed.json"
CONSTANT_NOTE = "constant signal: every question has the same value (0.5 is the ties' value, not a ranking)"


def drawn(rep):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        draw_auroc(ax, rep)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        heights = [[p.get_height() for p in c.patches] for c in ax.containers if hasattr(c, "patches")]
        return legend, heights, [t.get_text() for t in ax.texts], [t.get_text() for t in ax.get_xticklabels()]
    finally:
        plt.close(fig)


def entry(auroc, note=None):
    return {"auroc": auroc, "ci95": [auroc - 0.1, auroc + 0.1], **({"note": note} if note else {})}


def report(signals):
    """A report.json's shape: per signal (wrong-majority entry, zero-variance entry)."""
    out = {}
    for k, (w, z) in signals.items():
        out[k] = {"auroc_wrong_majority": w.pop("auroc"), **w, "classes": {"wrong": 2, "right": 6},
                  "zero_variance": {**z, "classes": {"zero_variance": 4, "with_variance": 4}}}
    return {"questions": 8, "truth": "simulation", "wrong_majority_share": 0.25, "zero_variance_share": 0.5,
            "signals": out}


def test_the_committed_picture_holds_both_aurocs_and_marks_the_constant_signal():
    rep = json.loads(COMMITTED.read_text())["result"]["report"]
    names = list(rep["signals"])
    (wl, ws, wbars), (zl, zs, zbars) = auroc_bars(rep)
    assert (wl, zl) == ("wrong majority", "zero-variance group")
    assert (ws, zs) == (rep["wrong_majority_share"], rep["zero_variance_share"])
    assert [b["signal"] for b in wbars] == [b["signal"] for b in zbars] == names
    for k, w, z in zip(names, wbars, zbars):
        s = rep["signals"][k]
        if k == "pivot_trace":  # constant: report.json keeps the ties' 0.5, the picture has no bar
            assert s["auroc_wrong_majority"] == s["zero_variance"]["auroc"] == 0.5
            assert w["mark"] == z["mark"] == "constant" and math.isnan(w["auroc"]) and math.isnan(z["auroc"])
        else:
            assert w["mark"] is z["mark"] is None
            assert (w["auroc"], z["auroc"]) == (s["auroc_wrong_majority"], s["zero_variance"]["auroc"])
    legend, heights, texts, ticks = drawn(rep)
    assert legend == ["wrong majority (74% of questions)", "zero-variance group (58% of questions)"]
    assert ticks == names and len(heights) == 2 and all(len(h) == len(names) for h in heights)
    assert heights[0][0] == rep["signals"]["consistency"]["auroc_wrong_majority"]
    assert heights[1][0] == rep["signals"]["consistency"]["zero_variance"]["auroc"]
    assert math.isnan(heights[0][-1]) and math.isnan(heights[1][-1])  # pivot_trace: no bar at 0.5
    assert texts == ["constant", "constant"]


def test_constant_undefined_and_real_aurocs_are_told_apart():
    rep = report({"flat": (entry(0.5, CONSTANT_NOTE), entry(0.5, CONSTANT_NOTE)),
                  "one_class": (entry(0.7), entry(float("nan"), "undefined: one class only (every one of the 8 "
                                                                "groups is zero-variance)")),
                  "tied_half": (entry(0.5), entry(0.5))})  # a real 0.5 (a ranking's) is a bar, not a mark
    (_, _, w), (_, _, z) = auroc_bars(rep)
    assert [b["mark"] for b in w] == ["constant", None, None]
    assert [b["mark"] for b in z] == ["constant", "undefined", None]
    assert auroc_mark({"auroc_wrong_majority": float("nan"), "ci95": [0, 1]}) == "undefined"
    _, heights, texts, _ = drawn(rep)
    assert texts == ["constant", "constant", "undefined"]
    assert [h == 0.5 for h in heights[0]] == [False, False, True] and heights[1][2] == 0.5
    flat = next(x for x in summary_lines(rep) if x.startswith("flat"))
    assert "0.500" not in flat and flat.count("constant signal") == 2  # the table says it too, not 0.5
