"""The materialize stage: the next dataset version from the pool and the route stage's decisions.

Annotated rows get the annotator's answer (``label_source=annotated``; a row labeled already keeps its
label), weak rows are unlabeled (the label withheld is kept as simulation truth), kept rows are unchanged,
discarded rows are left out and listed in the manifest, as are the rows past ``limit`` (never scored).

Column-wise (Arrow): the decisions are joined to the pool; the label vocabulary's table edits
(:mod:`devenus.records.labels`) give the new label columns and the manifest's change lines; the version
writer checks each 4096-row slice column-wise. No Python step per question.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from devenus.select.config import SelectConfig, fingerprint
from devenus.select.run import SelectionRun, bar
from devenus.select.shards import Stage

#: rows per write: the row groups (and so the bytes) of the version as it was always written
SLICE = 4096


def output_path(cfg: SelectConfig) -> Path:
    return Path(cfg.materialize.out) if cfg.materialize.out else Path(cfg.out) / "selected.parquet"


def _decisions(route_st: Stage, pool):
    """The route stage's ``(decision, label)`` columns in the pool's row order (a question without one is refused)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    dec = pq.read_table(str(route_st.shard_path(0)), columns=["index", "decision", "label"]).combine_chunks()
    keys = pc.struct_field(pool.column("extra_info"), "index")
    at = pc.index_in(keys, value_set=dec.column("index"))
    missing = np.flatnonzero(pc.is_null(at).to_numpy(zero_copy_only=False))
    if missing.size:
        raise ValueError(f"question {keys[int(missing[0])].as_py()!r} has no routing decision: rerun route")
    return dec.column("decision").take(at), dec.column("label").take(at)


def _edits(cfg: SelectConfig, pool, decision, known):
    """``(edited table, change lines, discard mask)``: annotated and weak rows relabeled by the label
    vocabulary's table edits, the discarded rows' removal lines, all lines in row order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devenus.records import labels
    from devenus.records.versions import removal_lines
    from devenus.select.annotate import annotate_table
    from devenus.select.stages.route import scatter

    n = pool.num_rows
    extra = pool.column("extra_info")
    labeled = pc.fill_null(pc.struct_field(extra, "labeled"), False)
    is_ann, is_weak = pc.equal(decision, "annotate"), pc.equal(decision, "weak")
    discard = pc.equal(decision, "discard").to_numpy(zero_copy_only=False)
    # a row labeled already keeps its label: the annotator is asked only about unlabeled rows
    relabel = pc.and_(is_ann, pc.invert(labeled))
    ask = np.flatnonzero(pc.and_(relabel, pc.is_null(known)).to_numpy(zero_copy_only=False))
    answers = pa.nulls(n, pa.string())
    if ask.size:
        answers = scatter(n, ask, annotate_table(cfg.materialize.annotation, pool.take(pa.array(ask))))
    answers = pc.coalesce(known, answers)  # triage probes were annotated while routing
    r = cfg.route
    why_ann = (f"annotated (chosen at random, seed {r.seed})" if r.signal == "random"
               else f"annotated (most uncertain by {r.signal})")
    table, annotated = labels.annotate_table(pool, relabel, answers, why_ann)
    table, weak = labels.hide_table(table, is_weak, "weak supervision (label withheld)")
    changes = pa.concat_tables([annotated, weak])
    gone = np.flatnonzero(discard)
    removals = removal_lines(pc.struct_field(extra, "index").take(pa.array(gone)),
                             f"discarded by {r.selector} routing on {r.signal}")
    removals = removals.add_column(0, "row", pa.array(gone, pa.int64()))
    lines = pa.concat_tables([changes.select(["row", "key", "field", "line"]), removals])
    lines = lines.take(pa.array(np.argsort(lines.column("row").to_numpy(), kind="stable")))
    return table, lines, discard


def _version_config(run: SelectionRun, route_st: Stage) -> dict[str, Any]:
    """What the manifest records of the run: pool, model, every stage's config, the routing summary."""
    cfg = run.cfg
    return {
        "pool": run.pool_identity, "model": cfg.generate.model, "generation": dataclasses.asdict(cfg.generate),
        "score": dataclasses.asdict(cfg.score), "route": dataclasses.asdict(cfg.route),
        "annotation": cfg.materialize.annotation, "routing": route_st.summary(),
        "run_fingerprint": fingerprint(route_st.config),
    }


def run_materialize(run: SelectionRun | SelectConfig, *, force: bool = False, progress: bool | None = None):
    """Write the next dataset version; returns its Manifest."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devenus.records.versions import VersionWriter, check_output, removal_lines

    run = SelectionRun.of(run)
    cfg = run.cfg
    route_st = run.stage("route").check().require_done("materialize")
    out = output_path(cfg)
    check_output(out, [run.parent], force=force)
    full = run.pool_table
    pool = full.slice(0, cfg.limit) if cfg.limit is not None else full
    n = pool.num_rows
    table, lines, discard = _edits(cfg, pool, *_decisions(route_st, pool))
    kept = table.filter(pa.array(~discard))
    b = bar(n, "materialize", progress)
    with VersionWriter(out, rule="select", config=_version_config(run, route_st), parents=[run.parent],
                       force=force) as w:
        w.add_change_lines(lines)
        for start in range(0, kept.num_rows, SLICE):
            w.write(kept.slice(start, SLICE))
            b.update(min(SLICE, kept.num_rows - start))
        b.update(n - b.n)
        if cfg.limit is not None and full.num_rows > n:  # the rest of the pool was never scored: left out, and listed
            rest = pc.struct_field(full.column("extra_info").slice(n), "index")
            w.add_change_lines(removal_lines(rest, f"not scored (limit={cfg.limit})"))
    b.close()
    return w.manifest
