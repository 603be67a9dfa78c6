"""Routing and materializing 1M questions x 8 samples from precomputed scores (the issue's <= 60 s).

    flock /tmp/devenus-heavy.lock python bench/select_route_materialize.py [--questions 1000000]
        [--samples 8] [--only new|reference|both]

Setup (not timed): a synthetic pool (half labeled with gold answers, half unlabeled with simulation
answers) written as a records Parquet, and a finished score stage built from synthetic per-sample
scores (G per question, aggregated by the mean like the score stage). Timed: ``run_route`` (ratio
selector, the paper's 29.3% / 42.1%) then ``run_materialize`` (simulation annotator), i.e. the two
stages exactly as ``devenus select route`` / ``materialize`` run them.

``reference`` is the materializer as it was before it went columnar (kept here, only for this
comparison): every pool row as a Python dict, one ``row_changes`` per changed row, and the version
writer's per-row checker (``VersionWriter.write`` with row dicts still validates that way). With
``both``, the bench also checks that both paths write byte-identical Parquet and manifest files.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def build_pool(n: int, path: Path) -> Path:
    """A records Parquet of ``n`` addition questions built column-wise (a 1M-row pool of dicts would
    take minutes to build and is not what is being measured)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from devenus.records.schema import records_schema

    schema = records_schema()
    i = np.arange(n)
    ids = pa.array(np.char.add("pool/", np.char.zfill(i.astype(str), 7)).astype(object), pa.string())
    a, b = pa.array(i.astype(str).astype(object)), pa.array((2 * i).astype(str).astype(object))
    question = pc.binary_join_element_wise("Compute ", a, " + ", b, ".", "")
    answer = pa.array((3 * i).astype(str).astype(object), pa.string())
    labeled = pa.array(i % 2 == 0)
    empty = pa.array(np.full(n, "", dtype=object), pa.string())
    rm_t, ex_t, sim_t = (schema.field(k).type for k in ("reward_model", "extra_info", "simulation"))
    msg = pa.StructArray.from_arrays([pa.array(np.full(n, "user", dtype=object), pa.string()), question],
                                     names=["role", "content"])
    prompt = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), msg)
    gt = pc.if_else(labeled, answer, empty)
    reward_model = pa.StructArray.from_arrays([pa.array(np.full(n, "rule", dtype=object), pa.string()), gt],
                                              fields=list(rm_t))
    cols = {"index": ids, "labeled": labeled,
            "label_source": pc.if_else(labeled, pa.scalar("gold"), pa.scalar("none")),
            "source": pa.array(np.full(n, "synthetic", dtype=object), pa.string()),
            "split": pa.array(np.full(n, "pool", dtype=object), pa.string()),
            "difficulty": pa.array(1 + i % 6, pa.int64()), "family": pa.array(np.full(n, "add", dtype=object), pa.string()),
            "question": question}
    extra = pa.StructArray.from_arrays([cols.get(f.name, pa.nulls(n, f.type)) for f in ex_t], fields=list(ex_t))
    sim = pa.StructArray.from_arrays([answer, pa.array(np.full(n, "none", dtype=object), pa.string())],
                                     fields=list(sim_t), mask=labeled)  # labeled rows: no simulation
    table = pa.table([pa.array(np.full(n, "synthetic/add", dtype=object), pa.string()), prompt,
                      pa.array(np.full(n, "math", dtype=object), pa.string()), reward_model, extra, sim], schema=schema)
    pq.write_table(table, str(path))
    return path


def build_scores(cfg, n: int, g: int) -> None:
    """A finished score stage: per-sample and per-question tables, as ``run_score`` writes them."""
    import pyarrow as pa

    from devenus.select.run import SelectionRun, shard_ranges
    from devenus.select.stages.score import questions_path
    from devenus.select.shards import write_table

    rng = np.random.default_rng(0)
    st = SelectionRun(cfg).stage("score").open(force=True)
    keys = np.char.add("pool/", np.char.zfill(np.arange(n).astype(str), 7)).astype(object)
    for i, sh in enumerate(shard_ranges(n, cfg.shard_size)):
        m = len(sh)
        u_ent = rng.gamma(2.0, 0.2, size=(m, g))
        cluster = rng.integers(0, 3, size=(m, g))
        largest = np.stack([(cluster == c).sum(1) for c in range(3)], 1).max(1)
        k = pa.array(keys[sh.start:sh.stop], pa.string())
        write_table(pa.table({"index": pa.array(np.repeat(keys[sh.start:sh.stop], g), pa.string()),
                              "sample": pa.array(np.tile(np.arange(g), m), pa.int32()),
                              "cluster": pa.array(cluster.ravel(), pa.int32()),
                              "u_consistency": pa.array(np.repeat(1.0 - largest / g, g)),
                              "u_entropy": pa.array(u_ent.ravel())}), st.shard_path(i))
        write_table(pa.table({"index": k, "n_samples": pa.array(np.full(m, g), pa.int32()),
                              "majority_ratio": pa.array(largest / g), "u_consistency": pa.array(1.0 - largest / g),
                              "u_entropy": pa.array(u_ent.mean(1))}), questions_path(st, i))
    st.finish({"questions": n, "signals": list(cfg.score.signals), "aggregation": cfg.score.aggregation})


def reference_materialize(cfg, force: bool = True):
    """The row-at-a-time materializer this bench replaced (the comparison baseline)."""
    import dataclasses

    import pyarrow.parquet as pq

    from devenus.records.io import iter_records
    from devenus.records.versions import VersionWriter, check_output, parent_of, row_changes
    from devenus.select.annotate import annotation_source
    from devenus.select.config import fingerprint
    from devenus.select.run import SelectionRun
    from devenus.select.stages.materialize import output_path

    run = SelectionRun(cfg)
    route_st = run.stage("route").check()
    out, src = output_path(cfg), run.pool
    check_output(out, [src], force=force)
    dec = pq.read_table(str(route_st.shard_path(0))).to_pydict()
    decision = dict(zip(dec["index"], dec["decision"]))
    rows = [r for batch in iter_records(src) for r in batch]
    rows = rows[: cfg.limit] if cfg.limit is not None else rows
    known = {k: a for k, a in zip(dec["index"], dec["label"]) if a is not None}
    annotate = [r for r in rows if decision.get(r["extra_info"]["index"]) == "annotate"
                and r["extra_info"]["index"] not in known and not r["extra_info"]["labeled"]]
    answers = dict(zip([r["extra_info"]["index"] for r in annotate],
                       annotation_source(cfg.materialize.annotation)(annotate) if annotate else []))
    answers.update(known)
    config = {"pool": run.pool_identity, "model": cfg.generate.model, "generation": dataclasses.asdict(cfg.generate),
              "score": dataclasses.asdict(cfg.score), "route": dataclasses.asdict(cfg.route),
              "annotation": cfg.materialize.annotation, "routing": route_st.summary(),
              "run_fingerprint": fingerprint(route_st.config)}
    with VersionWriter(out, rule="select", config=config, parents=[parent_of(src)], force=force, inputs=[src]) as w:
        batch = []
        for r in rows:
            k = r["extra_info"]["index"]
            d = decision.get(k)
            if d is None:
                raise ValueError(f"question {k!r} has no routing decision: rerun route")
            if d == "discard":
                w.remove(k, f"discarded by {cfg.route.selector} routing on {cfg.route.signal}")
            else:
                new = {**r, "reward_model": dict(r["reward_model"]), "extra_info": dict(r["extra_info"])}
                if d == "annotate" and k in answers and not r["extra_info"]["labeled"]:
                    new["reward_model"]["ground_truth"] = answers[k]
                    new["extra_info"]["labeled"] = True
                    new["extra_info"]["label_source"] = "annotated"
                    w.add_changes(row_changes(r, new, f"annotated (most uncertain by {cfg.route.signal})"))
                elif d == "weak":
                    new["reward_model"]["ground_truth"] = ""
                    new["extra_info"]["labeled"] = False
                    new["extra_info"]["label_source"] = "none"
                    if r["reward_model"]["ground_truth"]:
                        sim = dict(new.get("simulation") or {"noise": "none"})
                        if sim.get("hidden_answer") is None:
                            sim["hidden_answer"] = r["reward_model"]["ground_truth"]
                        new["simulation"] = sim
                    w.add_changes(row_changes(r, new, "weak supervision (label withheld)"))
                batch.append(new)
            if len(batch) >= 4096:
                w.write(batch)
                batch = []
        if batch:
            w.write(batch)
        if cfg.limit is not None:
            seen = 0
            for part in iter_records(src, columns=["extra_info"]):
                for r in part:
                    if seen >= cfg.limit:
                        w.remove(r["extra_info"]["index"], f"not scored (limit={cfg.limit})")
                    seen += 1
    return w.manifest


LISTS = ' "refusals": ['


def sha(path: Path, after: str | None = None) -> str:
    data = path.read_bytes()
    if after is not None:  # the part of a manifest from its lists on (the header holds the config)
        data = data[data.index(after.encode()):]
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--only", choices=("new", "reference", "both"), default="both")
    a = ap.parse_args()

    import devenus.select.route  # noqa: F401 - imported before the clock starts, as in a CLI run
    import devenus.signals  # noqa: F401
    from devenus.records.versions import manifest_path
    from devenus.select.config import load_config
    from devenus.select.stages import run_materialize, run_route

    n, g = a.questions, a.samples
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        pool = build_pool(n, tmp / "pool.parquet")
        cfg = load_config(None, {"pool": str(pool), "out": str(tmp / "run"), "shard_size": 1 << 16,
                                 "generate.samples": g, "score.signals": ["consistency", "entropy"],
                                 "route.selector": "ratio", "route.signal": "entropy"})
        build_scores(cfg, n, g)
        print(f"setup ({n} questions x {g} samples, pool and score stage): {time.perf_counter() - t0:.1f} s", flush=True)
        res = {}
        for which in (("new", "reference") if a.only == "both" else (a.only,)):
            shutil.rmtree(tmp / "run" / "route", ignore_errors=True)
            t0 = time.perf_counter()
            run_route(cfg, progress=False)
            t_route = time.perf_counter() - t0
            t0 = time.perf_counter()
            m = run_materialize(cfg, force=True, progress=False) if which == "new" else reference_materialize(cfg)
            t_mat = time.perf_counter() - t0
            out = Path(m.output_path)
            res[which] = (t_route, t_mat, sha(out), sha(manifest_path(out)))
            print(f"{which:<9} route {t_route:6.1f} s  materialize {t_mat:6.1f} s  total {t_route + t_mat:6.1f} s  "
                  f"({m.output['rows']} rows out, {m.counts['changes']} changes, {m.counts['removed_rows']} removed; "
                  f"sha256 parquet {res[which][2][:12]}, manifest lists {sha(manifest_path(out), LISTS)[:12]})",
                  flush=True)
        if "new" in res:
            total = sum(res["new"][:2])
            print(f"new total {total:.1f} s (limit 60 s: {'ok' if total <= 60 else 'OVER'})")
        if len(res) == 2:
            new, ref = res["new"], res["reference"]
            print(f"reference / new: {sum(ref[:2]) / sum(new[:2]):.1f}x; outputs byte-identical: "
                  f"parquet {new[2] == ref[2]}, manifest {new[3] == ref[3]}")
            if new[2:] != ref[2:]:
                raise SystemExit("the two paths wrote different files")


if __name__ == "__main__":
    main()
