"""Bad inputs to ``devenus select`` that need no model, one test per class: an empty pool is refused before
any stage starts; a stage refused before its first shard leaves nothing that blocks the corrected rerun; a
routing signal that does not vary is refused before routing (or warned about); demoted gold labels are
counted in the summary, the manifest and one console line; a report says why an AUROC is undefined."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from devenus.records import make_row, write_records
from devenus.records.versions import read_manifest
from devenus.select.config import load_config
from devenus.select.stages import SelectionRun, run_generate, run_materialize, run_route
from devenus.select.shards import StageError, write_table


def rows(n: int = 8) -> list[dict]:
    """Even rows gold-labeled, odd rows unlabeled with a hidden answer."""
    out = []
    for i in range(n):
        gold = i % 2 == 0
        out.append(make_row(data_source="t", index=f"p/{i}", source="t", question=f"q{i}",
                            ground_truth=str(i) if gold else "", labeled=gold,
                            simulation=None if gold else {"hidden_answer": str(i), "noise": "none"}))
    return out


def scored_run(tmp_path, u, majority_correct=None, pass_rate=None, **over):
    """A run folder whose score stage is complete with these per-question values (signal ``entropy``)."""
    n = len(u)
    pool = write_records(rows(n), tmp_path / "pool.parquet")
    cfg = load_config(None, {"pool": str(pool), "out": str(tmp_path / "run"), "route.signal": "entropy", **over})
    st = SelectionRun(cfg).stage("score").open()
    mc = majority_correct if majority_correct is not None else [None] * n
    cols = {"index": pa.array([f"p/{i}" for i in range(n)]), "majority": pa.array(["1"] * n),
            "pass_rate": pa.array([0.5] * n if pass_rate is None else pass_rate, pa.float64()), "majority_correct": pa.array(mc, pa.bool_())}
    for s in cfg.score.signals:
        cols[f"u_{s}"] = pa.array(np.asarray(u, dtype=np.float64) * (1 + len(s)))
    write_table(pa.table(cols), st.folder / "questions-00000.parquet")
    st.finish({"questions": n})
    return cfg


# ---- class 2 and 3: an empty pool, and what a refused run leaves -------------------------------------
def test_an_empty_pool_is_one_line_before_any_stage_and_the_fixed_rerun_is_accepted(tmp_path):
    import pyarrow.parquet as pq

    from devenus.records.schema import records_schema

    pool = tmp_path / "pool.parquet"
    pq.write_table(records_schema().empty_table(), str(pool))
    out = tmp_path / "run"
    cfg = load_config(None, {"pool": str(pool), "out": str(out)})
    with pytest.raises(StageError, match=f"the pool {pool} has no rows: nothing to select") as e:
        run_generate(cfg, progress=False)
    assert "\n" not in str(e.value) and not out.exists()  # nothing written: no stage.json to block a rerun
    r = subprocess.run([sys.executable, "-m", "devenus", "select", "run", "--set", f"pool={pool}", "--out", str(out),
                        "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [f"error: {e.value}"], r.stderr
    assert not out.exists()


def test_a_stage_without_a_shard_accepts_a_rerun_with_another_config(tmp_path):
    """A stage.json left by a run that failed before its first shard (another pool, say) is stale: the
    rerun with the corrected config takes the folder; once a shard exists, another config is refused."""
    from devenus.select.shards import Stage

    Stage(tmp_path / "generate", "generate", {"pool": "bad"}).open()
    st = Stage(tmp_path / "generate", "generate", {"pool": "fixed"}).open()
    assert json.loads((st.folder / "stage.json").read_text()) == {"pool": "fixed"}
    write_table(pa.table({"x": [1]}), st.shard_path(0))
    with pytest.raises(StageError, match="made with another config"):
        Stage(tmp_path / "generate", "generate", {"pool": "other"}).open()


# ---- class 4: a routing signal without information, and demoted gold labels ---------------------------
@pytest.mark.parametrize("u, what", [([0.7] * 8, "constant"), (0.7 + 1e-9 * np.arange(8), "near-constant")])
def test_a_constant_routing_signal_is_refused_before_routing(tmp_path, u, what):
    cfg = scored_run(tmp_path, u)
    with pytest.raises(StageError, match=f"the routing signal 'entropy' is {what} over the pool \\(8 questions, "
                                         r"\d distinct value\(s\), spread max - min = [0-9.e-]+ <= route.min_spread=1e-06\)"):
        run_route(cfg, progress=False)
    assert not (tmp_path / "run" / "route").exists()
    # warn: the run goes on, the summary keeps the warning
    cfg.route.on_constant_signal = "warn"
    s = run_route(cfg, progress=False).summary()
    assert s["signal_warning"].startswith(f"the routing signal 'entropy' is {what}")
    # interval routing without a budget does not rank by the signal: nothing to refuse
    cfg2 = scored_run(tmp_path / "b", u, **{"route.selector": "interval", "score.signals": ["accuracy", "entropy"]})
    assert "signal_warning" not in run_route(cfg2, progress=False).summary()


def test_demoted_gold_labels_are_counted_in_the_manifest_and_one_console_line(tmp_path, capsys):
    from devenus.select.cli import _routing_warnings

    # the least uncertain quarter is discarded, the most uncertain quarter annotated, the rest weak
    cfg = scored_run(tmp_path, np.arange(8, dtype=float), **{"route.rho_annotate": 0.25, "route.rho_discard": 0.25})
    s = run_route(cfg, progress=False).summary()
    # u ascending by key: p/0, p/1 discarded (p/0 gold), p/2..p/5 weak (p/2, p/4 gold), p/6, p/7 annotated
    want = {"labeled": 4, "weak": 2, "discard": 1}
    assert {k: s["demoted_labels"][k] for k in want} == want and "entropy" in s["demoted_labels"]["by"]
    m = run_materialize(cfg, progress=False)
    assert read_manifest(m.output_path).config["routing"]["demoted_labels"] == s["demoted_labels"]
    lost = {c.key for c in m.changes if c.field in ("extra_info.labeled", "<row>")}
    assert {"p/0", "p/2", "p/4"} <= lost
    _routing_warnings(m.config["routing"])
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["warning: 3 of 4 labeled rows lose their label by ratio routing on entropy: 2 routed weak "
                   "(label withheld), 1 discarded; each is listed in the manifest"]


def test_no_demotion_no_line(tmp_path, capsys):
    from devenus.select.cli import _routing_warnings

    cfg = scored_run(tmp_path, -np.arange(8, dtype=float) * (np.arange(8) % 2),
                     **{"route.selector": "interval",
                        "score.signals": ["accuracy", "entropy"]})
    s = run_route(cfg, progress=False).summary()
    assert s["demoted_labels"]["weak"] == s["demoted_labels"]["discard"] == 0
    _routing_warnings(s)
    assert capsys.readouterr().out == ""


def test_the_report_says_why_an_auroc_is_undefined(tmp_path):
    from devenus.select.report import build_report, summary_lines

    cfg = scored_run(tmp_path, np.arange(8, dtype=float), majority_correct=[True] * 8)
    rep = build_report(cfg, boot=10)
    s = rep["signals"]["entropy"]
    assert s["auroc_wrong_majority"] != s["auroc_wrong_majority"]  # NaN, and why:
    assert s["note"] == "undefined: one class only (every one of the 8 majorities is right)"
    assert any(line.startswith("entropy") and s["note"] in line for line in summary_lines(rep))
    assert not any("nan" in line for line in summary_lines(rep))
    cfg = scored_run(tmp_path / "c", [0.5] * 8, majority_correct=[True, False] * 4)
    s = build_report(cfg, boot=10)["signals"]["entropy"]
    assert s["auroc_wrong_majority"] == 0.5 and s["note"].startswith("constant signal")


def test_the_report_gives_each_signals_auroc_for_a_wrong_majority_and_a_zero_variance_group_with_classes(tmp_path):
    from devenus.select.report import build_report, summary_lines

    # 8 questions; entropy rises with the index. Wrong majority: the top 3 (AUROC 1). Zero-variance groups
    # (pass rate 0 or 1): indices 0, 1, 6 and 7, both ends, so the ranking puts them 2 low and 2 high
    u = np.arange(8, dtype=float)
    pr = [1.0, 1.0, 0.75, 0.5, 0.5, 0.25, 0.0, 0.0]
    cfg = scored_run(tmp_path, u, majority_correct=[True] * 5 + [False] * 3, pass_rate=pr)
    rep = build_report(cfg, boot=10)
    s = rep["signals"]["entropy"]
    assert s["auroc_wrong_majority"] == 1.0 and s["classes"] == {"wrong": 3, "right": 5}
    z = s["zero_variance"]
    assert z["classes"] == {"zero_variance": 4, "with_variance": 4}
    assert z["auroc"] == 0.5 and "note" not in z  # ranks: zero variance 1, 2, 7, 8 -> (18 - 10) / 16
    assert len(z["ci95"]) == 2 and rep["zero_variance_share"] == 0.5
    line = next(x for x in summary_lines(rep) if x.startswith("entropy"))
    assert "(wrong 3 / right 5)" in line and "(zero-variance 4 / with variance 4)" in line
    # every group with variance: the zero-variance AUROC is undefined, and says why
    cfg = scored_run(tmp_path / "b", u, majority_correct=[True] * 5 + [False] * 3, pass_rate=[0.5] * 8)
    z = build_report(cfg, boot=10)["signals"]["entropy"]["zero_variance"]
    assert z["auroc"] != z["auroc"] and z["note"] == "undefined: one class only (every one of the 8 groups is with variance)"
    # the easy ones only: the signal ranks them first, AUROC 0
    cfg = scored_run(tmp_path / "c", u, majority_correct=[True] * 5 + [False] * 3, pass_rate=[1.0, 1.0] + [0.5] * 6)
    assert build_report(cfg, boot=10)["signals"]["entropy"]["zero_variance"]["auroc"] == 0.0
