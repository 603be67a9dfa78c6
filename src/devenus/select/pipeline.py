"""The four stages of active selection, each resumable (see :mod:`devenus.select.shards`):

``generate`` -> ``<out>/generate/shard-*.parquet``  one row per (question, sample): tokens, text, truncated
``score``    -> ``<out>/score/shard-*.parquet``     one row per (question, sample): answer, reward, signals
              ``<out>/score/questions-*.parquet``   one row per question: aggregated uncertainties, vote
``route``    -> ``<out>/route/shard-00000.parquet`` one row per question: decision, rank, routing score
``materialize`` -> the next dataset version (records Parquet + manifest) through records.versions

Every table is keyed by ``extra_info.index`` (column ``index``) and, per sample, ``sample``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from devenus.select.config import MODEL_SIGNALS, SelectConfig, fingerprint
from devenus.select.route.router import get_router
from devenus.select.shards import Stage, StageError, write_table
# the per-shard units, which the Ray Data actors run too
from devenus.select.work import (generate_shard, make_generator, model_pair, pool_identity, pool_path, pool_rows,
                                 questions_path, score_shard, shard_ranges, stage)


def _bar(total: int, desc: str, progress: bool | None, unit: str = "q"):
    from devenus.progress import progress_bar  # a bar on a terminal, plain lines in a log file

    return progress_bar(total, desc, unit, enabled=progress, smoothing=0.1, dynamic_ncols=True)


def _run_sharded(cfg: SelectConfig, name: str, *, force: bool, progress: bool | None, actors: int,
                 worker, summary: dict[str, Any], shard_done=None) -> Stage:
    """The loop every sharded stage runs: open the stage folder, skip the shards already written (and, with
    ``shard_done(st, i)``, complete), run the rest here (``worker(st) -> work(i, rows) -> tokens or None``)
    or on a Ray Data actor pool, and mark the stage done with ``summary``."""
    rows = pool_rows(cfg)  # read and checked before the stage folder is touched: a refused pool leaves nothing
    if not rows:
        raise StageError(f"the pool {pool_path(cfg)} has no rows: nothing to select (import or choose a non-empty pool)")
    st = stage(cfg, name).open(force)
    shards = shard_ranges(len(rows), cfg.shard_size)
    todo = [i for i in range(len(shards)) if not (st.has(i) and (shard_done is None or shard_done(st, i)))]
    if st.done and not todo:
        return st
    bar = _bar(len(rows), name, progress)
    bar.update(sum(len(shards[i]) for i in range(len(shards)) if i not in todo))
    if actors:
        from devenus.select.generate.ray_data import run_shards

        for i in run_shards(cfg, name, todo, actors, num_cpus=cfg.generate.actor_cpus,
                            num_gpus=cfg.generate.actor_gpus):
            bar.update(len(shards[i]))
    else:
        work, tokens = worker(st), 0
        for i in todo:
            n = work(i, [rows[j] for j in shards[i]])
            bar.update(len(shards[i]))
            if n:
                tokens += n
                bar.set_postfix(tok_s=f"{tokens / max(bar.format_dict['elapsed'], 1e-9):.0f}", refresh=False)
    bar.close()
    st.finish({"questions": len(rows), "shards": len(shards), **summary})
    return st


def run_generate(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None, model=None,
                 actors: int = 0) -> Stage:
    """The generate stage; ``actors > 0`` runs the shards on a Ray Data actor pool instead."""
    if cfg.generate.generator == "vllm" and not actors:  # (Ray actors import it where they run)
        from devenus.generate.vllm import import_vllm

        import_vllm()  # a missing vLLM is one line now, before the pool is read

    made = []

    def worker(st: Stage):
        gen = make_generator(cfg, model)
        made.append(gen)
        return lambda i, part: generate_shard(cfg, gen, part, st.shard_path(i))

    try:
        return _run_sharded(cfg, "generate", force=force, progress=progress, actors=actors, worker=worker,
                            summary={"samples_per_question": cfg.generate.samples})
    finally:
        # a vLLM engine holds most of the GPU: shut down here, before the score stage loads its scorer (the
        # HF generator has no close: its model is the scorer, shared through `model`)
        for gen in made:
            getattr(gen, "close", lambda: None)()


def run_score(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None, model=None,
              actors: int = 0) -> Stage:
    """The score stage; ``actors > 0`` runs the shards on a Ray Data actor pool instead."""
    gen_st = stage(cfg, "generate").check()
    gen_st.require_done("score")

    def worker(st: Stage):
        model_tok = model_pair(model, cfg) if any(x in MODEL_SIGNALS for x in cfg.score.signals) else None
        return lambda i, part: score_shard(cfg, model_tok, part, gen_st.shard_path(i), st, i)

    # a shard counts as scored once its question table exists (written after the sample table)
    return _run_sharded(cfg, "score", force=force, progress=progress, actors=actors, worker=worker,
                        shard_done=lambda st, i: questions_path(st, i).exists(),
                        summary={"signals": list(cfg.score.signals), "aggregation": cfg.score.aggregation})


def read_questions(st: Stage):
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = sorted(st.folder.glob("questions-*.parquet"))
    return pa.concat_tables([pq.read_table(str(p)) for p in paths])


# ------------------------------------------------------------------------------ route
def route_scores(q: dict[str, np.ndarray], keys: list[str], cfg: SelectConfig,
                 probe_oracle=None) -> tuple[np.ndarray, dict[str, Any]]:
    """Decisions per question from per-question columns (``u_<signal>``, ``pass_rate``,
    ``majority_correct``) by the configured router (:mod:`devenus.select.route.router`): vectorised, the
    core of the route stage (and of its benchmark).

    ``probe_oracle(indices) -> (pass_rate, majority_correct, labels)`` annotates a router's probes.
    The returned info holds ``u`` (after any sign flip) and, for triage, ``probes`` and ``labels``."""
    from devenus.select.config import RANDOM
    from devenus.select.route import tiebreak
    from devenus.select.route.router import RouteInputs, get_router

    r = cfg.route
    # random: every question equally uncertain, so the seeded tie-breaker alone orders them
    u = np.zeros(len(keys)) if r.signal == RANDOM else np.asarray(q[f"u_{r.signal}"], dtype=np.float64)
    info: dict[str, Any] = {"signal": r.signal, "aggregation": cfg.score.aggregation, "selector": r.selector,
                            "seed": r.seed, "sign": 1}
    ties = tiebreak(keys, r.seed)
    dec, u = get_router(r.selector).route(RouteInputs(q, keys, u, ties, r, probe_oracle), info)
    return dec, {**info, "u": u, "ties": ties}


def probe_oracle(cfg: SelectConfig, score_st: Stage, keys: list[str], majority: list):
    """Annotate triage probes with the configured source and grade the existing G samples against
    the annotations: ``indices -> (pass rate, majority correct, labels)``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devenus.select.annotate import annotation_source
    from devenus.verify import get_default_verifier

    def oracle(idx):
        want = [keys[i] for i in idx]
        by_key = {r["extra_info"]["index"]: r for r in pool_rows(cfg)}
        labels = annotation_source(cfg.materialize.annotation)([by_key[k] for k in want])
        samples = score_st.read_all(columns=["index", "pred"])
        samples = samples.filter(pc.is_in(samples.column("index"), value_set=pa.array(want)))
        preds: dict[str, list] = {}
        for k, p in zip(samples.column("index").to_pylist(), samples.column("pred").to_pylist()):
            preds.setdefault(k, []).append(p)
        v = get_default_verifier()
        pass_rate = [float(np.mean([p is not None and v.equivalent(p, a) for p in preds[k]])) for k, a in zip(want, labels)]
        maj = [bool(majority[i] is not None and v.equivalent(majority[i], a)) for i, a in zip(idx, labels)]
        return pass_rate, maj, labels
    return oracle


def _floats(col) -> np.ndarray:
    """A numeric or boolean Arrow column as float64 (nulls -> NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)


def run_route(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None) -> Stage:
    import pyarrow as pa

    from devenus.select.route import DECISIONS, uncertainty_order

    score_st = stage(cfg, "score").check()
    score_st.require_done("route")
    qt = read_questions(score_st)
    keys = qt.column("index").to_pylist()
    cols = {name: _floats(qt.column(name)) for name in qt.column_names
            if name.startswith("u_") or name in ("pass_rate", "majority_correct")}
    warning = _check_signal(cfg, cols, keys)  # before the stage folder is touched: a refusal leaves nothing
    st = stage(cfg, "route").open(force)
    if st.done and st.has(0):
        return st
    oracle = (probe_oracle(cfg, score_st, keys, qt.column("majority").to_pylist())
              if get_router(cfg.route.selector).annotates_while_routing else None)
    dec, info = route_scores(cols, keys, cfg, oracle)
    u, ties = info.pop("u"), info.pop("ties")
    probes, labels = info.pop("probes", []), info.pop("labels", [])
    label = pa.nulls(len(keys), pa.string())
    if len(probes):
        at = np.full(len(keys), -1, dtype=np.int64)
        at[np.asarray(probes, dtype=np.int64)] = np.arange(len(probes))
        label = pa.array(list(labels), pa.string()).take(pa.array(at, mask=at < 0))
    rank = np.empty(len(keys), dtype=np.int64)  # 0 = the most uncertain
    rank[uncertainty_order(np.nan_to_num(u, nan=-np.inf), ties)] = np.arange(len(keys))
    table = pa.table({"index": qt.column("index").combine_chunks().cast(pa.string()),
                      "decision": pa.array(np.asarray(DECISIONS, dtype=object)[dec], pa.string()),
                      "u": pa.array(u, pa.float64()), "rank": pa.array(rank, pa.int64()),
                      "label": label})
    write_table(table, st.shard_path(0))
    counts = {name: int((dec == code).sum()) for code, name in enumerate(DECISIONS)}
    extra = {"signal_warning": warning} if warning else {}
    st.finish({**info, "questions": len(keys), "counts": counts, **extra,
               "demoted_labels": _demoted_labels(cfg, keys, dec)})
    return st


def _check_signal(cfg: SelectConfig, cols: dict[str, np.ndarray], keys: list[str]) -> str | None:
    """Refuse (or, with ``route.on_constant_signal=warn``, return the warning for) a routing signal that does
    not vary over the pool, when the configured router ranks by it (:func:`~devenus.select.route.router.uninformative`)."""
    from devenus.select.config import RANDOM
    from devenus.select.route.router import uninformative

    r = cfg.route
    if r.signal == RANDOM or not get_router(r.selector).ranks_by_signal(r) or f"u_{r.signal}" not in cols:
        return None
    why = uninformative(cols[f"u_{r.signal}"], r.signal, r.min_spread)
    if why is None:
        return None
    if r.on_constant_signal == "warn":
        return why
    raise StageError(f"{why}; refused before routing (choose another route.signal, or set "
                     f"route.on_constant_signal=warn to route anyway)")


def _demoted_labels(cfg: SelectConfig, keys: list[str], dec: np.ndarray) -> dict[str, Any]:
    """How many rows with a trusted label lose it by this routing (``weak``: the label withheld; ``discard``:
    the row left out), and why: what the manifest and the console report."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devenus.select.route import DISCARD, WEAK

    extra = _read_pool_table(pool_path(cfg)).column("extra_info")
    labeled = pc.fill_null(pc.struct_field(extra, "labeled"), False)
    at = pc.index_in(pa.array(keys, pa.string()), value_set=pc.struct_field(extra, "index"))
    gold = pc.fill_null(labeled.take(at), False).to_numpy(zero_copy_only=False)
    weak, gone = int((gold & (dec == WEAK)).sum()), int((gold & (dec == DISCARD)).sum())
    r = cfg.route
    return {"labeled": int(gold.sum()), "weak": weak, "discard": gone, "by": f"{r.selector} routing on {r.signal}",
            "why": "weak: the label is withheld (kept as simulation truth); discard: the row is left out"}


def demoted_line(summary: dict[str, Any]) -> str | None:
    """The console line for labels a routing demotes (None when it demotes none)."""
    d = summary.get("demoted_labels") or {}
    n = d.get("weak", 0) + d.get("discard", 0)
    if not n:
        return None
    return (f"warning: {n} of {d['labeled']} labeled rows lose their label by {d['by']}: {d['weak']} routed weak "
            f"(label withheld), {d['discard']} discarded; each is listed in the manifest")


# ------------------------------------------------------------------------------ materialize
def output_path(cfg: SelectConfig) -> Path:
    return Path(cfg.materialize.out) if cfg.materialize.out else Path(cfg.out) / "selected.parquet"


def run_materialize(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None):
    """Write the next dataset version; returns its Manifest. Annotated rows get the annotator's answer
    (``label_source=annotated``), weak rows are unlabeled, kept rows unchanged, discarded rows left
    out and listed in the manifest.

    Column-wise (Arrow): the decisions are joined to the pool; the label vocabulary's table edits
    (:mod:`devenus.records.labels`) give the new label columns and the manifest's changes; the
    version writer checks each 4096-row slice column-wise. No Python step per question."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from devenus.records import labels
    from devenus.records.versions import VersionWriter, check_output, parent_of, removal_lines
    from devenus.select.annotate import annotate_table

    route_st = stage(cfg, "route").check()
    route_st.require_done("materialize")
    out = output_path(cfg)
    src = pool_path(cfg)
    check_output(out, [src], force=force)
    dec = pq.read_table(str(route_st.shard_path(0)), columns=["index", "decision", "label"]).combine_chunks()
    # not validated here: the version writer validates every row it writes
    full = _read_pool_table(src)
    pool = full.slice(0, cfg.limit) if cfg.limit is not None else full
    n = pool.num_rows
    extra = pool.column("extra_info")
    keys = pc.struct_field(extra, "index")
    at = pc.index_in(keys, value_set=dec.column("index"))
    missing = np.flatnonzero(pc.is_null(at).to_numpy(zero_copy_only=False))
    if missing.size:
        raise ValueError(f"question {keys[int(missing[0])].as_py()!r} has no routing decision: rerun route")
    decision = dec.column("decision").take(at)
    known = dec.column("label").take(at)  # triage probes, annotated already
    labeled = pc.fill_null(pc.struct_field(extra, "labeled"), False)
    is_ann, is_weak = pc.equal(decision, "annotate"), pc.equal(decision, "weak")
    discard = pc.equal(decision, "discard").to_numpy(zero_copy_only=False)
    # a row labeled already keeps its label: the annotator is asked only about unlabeled rows
    relabel = pc.and_(is_ann, pc.invert(labeled))
    ask = np.flatnonzero(pc.and_(relabel, pc.is_null(known)).to_numpy(zero_copy_only=False))
    answers = pa.nulls(n, pa.string())
    if ask.size:
        got = annotate_table(cfg.materialize.annotation, pool.take(pa.array(ask)))
        answers = _scatter(n, ask, got)
    answers = pc.coalesce(known, answers)

    why_ann = (f"annotated (chosen at random, seed {cfg.route.seed})" if cfg.route.signal == "random"
               else f"annotated (most uncertain by {cfg.route.signal})")
    # the label vocabulary's table edits: a weak row's withheld label stays as simulation truth
    table, annotated = labels.annotate_table(pool, relabel, answers, why_ann)
    table, weak = labels.hide_table(table, is_weak, "weak supervision (label withheld)")
    changes = pa.concat_tables([annotated, weak])
    gone = np.flatnonzero(discard)
    removals = removal_lines(keys.take(pa.array(gone)), f"discarded by {cfg.route.selector} routing on {cfg.route.signal}")
    removals = removals.add_column(0, "row", pa.array(gone, pa.int64()))
    lines = pa.concat_tables([changes.select(["row", "key", "field", "line"]), removals])
    lines = lines.take(pa.array(np.argsort(lines.column("row").to_numpy(), kind="stable")))

    summary = route_st.summary()
    config = {
        "pool": pool_identity(cfg), "model": cfg.generate.model, "generation": dataclasses.asdict(cfg.generate),
        "score": dataclasses.asdict(cfg.score), "route": dataclasses.asdict(cfg.route),
        "annotation": cfg.materialize.annotation, "routing": summary,
        "run_fingerprint": fingerprint(route_st.config),
    }
    kept = table.filter(pa.array(~discard))
    bar = _bar(n, "materialize", progress)
    with VersionWriter(out, rule="select", config=config, parents=[parent_of(src)], force=force, inputs=[src]) as w:
        w.add_change_lines(lines)
        # slices of 4096 rows: the row groups (and so the bytes) of the version as it was always written
        for start in range(0, kept.num_rows, 4096):
            w.write(kept.slice(start, 4096))
            bar.update(min(4096, kept.num_rows - start))
        bar.update(n - bar.n)
        if cfg.limit is not None and full.num_rows > n:  # the rest of the pool was never scored: left out, and listed
            rest = pc.struct_field(full.column("extra_info").slice(n), "index")
            w.add_change_lines(removal_lines(rest, f"not scored (limit={cfg.limit})"))
    bar.close()
    return w.manifest


def _read_pool_table(path: Path):
    """The pool as one Arrow table (pandas index columns dropped, as ``iter_records`` drops them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from devenus.records import RecordError

    try:
        t = pq.read_table(str(path))
    except (pa.ArrowException, OSError) as exc:
        raise RecordError(f"cannot read {path} as a Parquet records file: {exc}") from exc
    keep = [c for c in t.column_names if not c.startswith("__index_level_")]
    for c in ("extra_info", "reward_model"):
        if c not in keep:
            raise RecordError(f"{path} has no {c} column: not a records file")
    return t.select(keep).combine_chunks()


def _scatter(n: int, at: np.ndarray, values):
    """A string array of length ``n``: ``values`` at positions ``at``, null elsewhere."""
    import pyarrow as pa

    pos = np.full(n, -1, dtype=np.int64)
    pos[at] = np.arange(len(at))
    return values.take(pa.array(pos, mask=pos < 0))


def run_all(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None, model=None, actors: int = 0):
    """All four stages; each resumes from its last complete shard. The model is loaded once, and only
    if a stage has work that needs it."""
    loaded: dict[str, Any] = {}

    def lazy():
        if "m" not in loaded:
            loaded["m"] = model_pair(model, cfg)
        return loaded["m"]

    run_generate(cfg, force=force, progress=progress, model=lazy, actors=actors)
    run_score(cfg, force=force, progress=progress, model=lazy, actors=actors)
    run_route(cfg, force=force, progress=progress)
    return run_materialize(cfg, force=force, progress=progress)
