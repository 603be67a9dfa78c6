"""The column-wise materializer against the row-at-a-time one it replaced (kept in the bench as the
reference): byte-identical Parquet and manifest on a mixed pool (gold, unlabeled, simulation truth
or not, triage labels, extra metadata, awkward strings, a limit), the same errors, and the sources."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from devenus.records import make_row, read_records, write_records
from devenus.records.versions import manifest_path, verify_manifest
from devenus.select.config import load_config
from devenus.select.stages import SelectionRun, run_materialize
from devenus.select.shards import write_table

ROOT = Path(__file__).resolve().parents[2]


def reference():
    spec = importlib.util.spec_from_file_location("bench_route_materialize", ROOT / "bench" / "select_route_materialize.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.reference_materialize


ODD = ['7 "quoted"', "back\\slash", "line\nbreak", "tab\tand \x01", "ünï ✓"]


def pool_rows(n=40):
    rows = []
    for i in range(n):
        kind = i % 5
        answer = ODD[i % len(ODD)] if i % 7 == 0 else str(3 * i)
        sim = {"hidden_answer": answer, "noise": "none"}
        if kind == 0:  # gold, no simulation
            r = make_row(data_source="t", index=f"p/{i}", source="t", question=f"q{i}", ground_truth=answer)
        elif kind == 1:  # gold with simulation truth
            r = make_row(data_source="t", index=f"p/{i}", source="t", question=f"q{i}", ground_truth=answer, simulation=sim)
        elif kind == 2:  # gold, simulation without a hidden answer
            r = make_row(data_source="t", index=f"p/{i}", source="t", question=f"q{i}", ground_truth=answer,
                         simulation={"hidden_answer": None, "noise": "active"})
        else:  # unlabeled with simulation truth
            r = make_row(data_source="t", index=f"p/{i}", source="t", question=f"q{i}", labeled=False, simulation=sim)
        r["extra_info"]["difficulty"] = i % 4 if i % 3 else None
        r["extra_info"]["note"] = f"n{i}" if i % 2 else None
        rows.append(r)
    return rows


def setup_run(tmp_path, rows, decisions, labels=None, limit=None, annotation="simulation"):
    pool = write_records(rows, tmp_path / "pool.parquet")
    over = {"pool": str(pool), "out": str(tmp_path / "run"), "materialize.annotation": annotation}
    if limit is not None:
        over["limit"] = limit
    cfg = load_config(None, over)
    n = len(decisions)
    st = SelectionRun(cfg).stage("route").open()
    write_table(pa.table({"index": [r["extra_info"]["index"] for r in rows[:n]], "decision": list(decisions),
                          "u": np.zeros(n), "rank": np.arange(n), "label": pa.array(labels or [None] * n, pa.string())}),
                st.shard_path(0))
    st.finish({"counts": {d: list(decisions).count(d) for d in ("annotate", "discard", "weak", "keep")},
               "selector": "ratio", "signal": "consistency"})
    return cfg


def both(cfg, tmp_path):
    cfg.materialize.out = str(tmp_path / "new.parquet")
    m_new = run_materialize(cfg, progress=False)
    cfg.materialize.out = str(tmp_path / "ref.parquet")
    m_ref = reference()(cfg, force=False)
    new, ref = tmp_path / "new.parquet", tmp_path / "ref.parquet"
    assert new.read_bytes() == ref.read_bytes()
    assert manifest_path(new).read_text().replace("new.parquet", "ref.parquet") == manifest_path(ref).read_text()
    verify_manifest(new)
    return m_new, m_ref


def test_byte_identical_to_the_row_materializer_on_a_mixed_pool(tmp_path):
    rows = pool_rows(40)
    rng = np.random.default_rng(1)
    n = 33
    dec = rng.choice(["annotate", "weak", "discard", "keep"], size=n).tolist()
    dec[:10] = ["weak"] * 4 + ["annotate"] * 6
    labels = [None] * n
    labels[5], labels[6], labels[8] = "probe 5", 'probe "6"', "probe 8"  # triage probes, annotated already
    cfg = setup_run(tmp_path, rows, dec, labels, limit=n)
    m, _ = both(cfg, tmp_path)
    fields = {c.field for c in m.changes}
    assert {"reward_model.ground_truth", "extra_info.labeled", "extra_info.label_source",
            "simulation.hidden_answer", "simulation.noise", "<row>"} <= fields
    assert sum(c.why.startswith("not scored") for c in m.changes) == 40 - n
    out = {r["extra_info"]["index"]: r for r in read_records(tmp_path / "new.parquet")}
    assert out["p/5"]["reward_model"]["ground_truth"] == "15" and out["p/5"]["extra_info"]["label_source"] == "gold"
    assert out["p/8"]["reward_model"]["ground_truth"] == "probe 8"  # unlabeled: the probe's label
    assert out["p/9"]["reward_model"]["ground_truth"] == "27"  # unlabeled: the simulation annotator's
    assert out["p/9"]["extra_info"]["label_source"] == "annotated" and out["p/9"]["extra_info"]["labeled"] is True
    assert out["p/0"]["extra_info"]["labeled"] is False and out["p/0"]["reward_model"]["ground_truth"] == ""
    assert out["p/0"]["simulation"] == {"hidden_answer": ODD[0], "noise": "none"}  # the withheld label kept as truth
    assert out["p/2"]["simulation"] == {"hidden_answer": "6", "noise": "active"}
    assert out["p/3"] == rows[3]  # weak and unlabeled already: unchanged

def test_a_large_pool_spans_several_writer_batches(tmp_path):
    rows = [make_row(data_source="t", index=f"p/{i:05d}", source="t", question=f"q{i}", labeled=i % 3 == 0,
                     ground_truth=str(i) if i % 3 == 0 else "", simulation=None if i % 3 == 0 else {"hidden_answer": str(i)})
            for i in range(9000)]
    dec = np.random.default_rng(0).choice(["annotate", "weak", "discard"], size=9000, p=[0.3, 0.3, 0.4]).tolist()
    m, _ = both(setup_run(tmp_path, rows, dec), tmp_path)
    assert m.output["rows"] == 9000 - dec.count("discard")


def test_errors_are_the_row_materializers(tmp_path):
    rows = pool_rows(10)
    cfg = setup_run(tmp_path, rows, ["weak"] * 9)  # the last question was never routed
    with pytest.raises(ValueError, match=r"question 'p/9' has no routing decision: rerun route"):
        run_materialize(cfg, progress=False)
    rows[3]["simulation"] = None
    (tmp_path / "b").mkdir()
    cfg = setup_run(tmp_path / "b", rows, ["annotate"] * 10)
    msgs = []
    for fn in (lambda c: run_materialize(c, progress=False), lambda c: reference()(c, force=False)):
        with pytest.raises(ValueError) as e:
            fn(cfg)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "'p/3' has no simulation.hidden_answer" in msgs[0]
    assert not (tmp_path / "b" / "run" / "selected.parquet").exists()


def test_answer_file_source(tmp_path):
    rows = pool_rows(10)
    ans = tmp_path / "answers.jsonl"
    ans.write_text("".join(json.dumps({"index": f"p/{i}", "answer": f"a{i}"}) + "\n" for i in range(10)))
    cfg = setup_run(tmp_path, rows, ["annotate"] * 10, annotation=f"file:{ans}")
    m, _ = both(cfg, tmp_path)
    out = read_records(tmp_path / "new.parquet")
    assert [r["reward_model"]["ground_truth"] for r in out if r["extra_info"]["label_source"] == "annotated"] == \
        [f"a{i}" for i in range(10) if i % 5 >= 3]
    ans.write_text(json.dumps({"index": "p/3", "answer": "x"}) + "\n" + json.dumps({"index": "p/3", "answer": "y"}) + "\n")
    cfg.materialize.out = str(tmp_path / "again.parquet")
    with pytest.raises(ValueError, match=r"row 1: duplicate index 'p/3'"):
        run_materialize(cfg, progress=False)
    ans.write_text(json.dumps({"index": "p/3", "answer": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"has no answer for question 'p/4'"):
        run_materialize(cfg, progress=False)


def test_a_run_hashes_its_pool_once(tmp_path, monkeypatch):
    # the stage identities and the version's parent all read the one hash a SelectionRun keeps
    import devenus.records.versions as versions

    cfg = setup_run(tmp_path, pool_rows(12), ["annotate", "weak", "discard", "keep"] * 3)
    pool = Path(cfg.pool).resolve()
    real, seen = versions.sha256_file, []
    monkeypatch.setattr(versions, "sha256_file", lambda p: (seen.append(Path(p).resolve()), real(p))[1])
    run = SelectionRun(cfg)
    run.stage("route").check()
    m = run_materialize(run, progress=False)
    assert seen.count(pool) == 1
    assert [p.sha256 for p in m.parents] == [real(pool)] and m.config["pool"]["pool_sha256"] == real(pool)
