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

from devenus.select.config import MODEL_SIGNALS, SelectConfig, fingerprint, interval_bounds
from devenus.select.route.router import get_router
from devenus.select.shards import Stage, write_json, write_table
from devenus.select.sources import load_model, model_identity, resolve_model, resolve_pool


def _bar(total: int, desc: str, progress: bool | None, unit: str = "q"):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=False if progress else (None if progress is None else True),
                smoothing=0.1, dynamic_ncols=True)


# ------------------------------------------------------------------------------ inputs
def pool_path(cfg: SelectConfig) -> Path:
    return resolve_pool(cfg.pool)


def pool_rows(cfg: SelectConfig) -> list[dict]:
    from devenus.records import read_records

    rows = read_records(pool_path(cfg))
    return rows[: cfg.limit] if cfg.limit is not None else rows


def _shards(n: int, size: int) -> list[range]:
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def _pool_identity(cfg: SelectConfig) -> dict[str, Any]:
    from devenus.records.versions import parent_of

    p = parent_of(pool_path(cfg))
    return {"pool": p.name, "pool_sha256": p.sha256, "limit": cfg.limit, "shard_size": cfg.shard_size}


def stage(cfg: SelectConfig, name: str) -> Stage:
    # the model's content hash: a folder whose weights changed in place makes new samples
    base = {"input": _pool_identity(cfg), **cfg.generate_identity(), "model": model_identity(cfg.generate.model)}
    conf = {"generate": base}
    conf["score"] = {**base, **cfg.section("score")}
    conf["route"] = {**conf["score"], **cfg.section("route")}
    if get_router(cfg.route.selector).annotates_while_routing:  # the probes' labels are part of the routing
        conf["route"]["annotation"] = cfg.materialize.annotation
    return Stage(Path(cfg.out) / name, name, conf[name])


# ------------------------------------------------------------------------------ generate
def make_generator(cfg: SelectConfig, model=None):
    """The configured generator. ``model``: an HF ``(model, tokenizer)`` pair or a loader of one (the HF
    generator only; vLLM loads the model folder itself, so no HF copy of the model is loaded for it)."""
    g = cfg.generate
    if g.generator == "vllm":
        from devenus.select.generate.vllm import VLLMGenerator

        return VLLMGenerator(resolve_model(g.model), samples=g.samples, temperature=g.temperature, top_p=g.top_p,
                             max_new_tokens=g.max_new_tokens, seed=g.seed,
                             gpu_memory_utilization=g.gpu_memory_utilization,
                             tensor_parallel_size=g.tensor_parallel_size, max_model_len=g.max_model_len)
    from devenus.select.generate import HFGenerator

    m, tok = _model(model, cfg)
    return HFGenerator(m, tok, samples=g.samples, temperature=g.temperature, top_p=g.top_p,
                       max_new_tokens=g.max_new_tokens, batch_size=g.batch_size, seed=g.seed)


def generate_shard(cfg: SelectConfig, gen, part: list[dict], path: Path) -> int:
    """Generate one shard's samples and write them to ``path``; returns the tokens generated."""
    import pyarrow as pa

    keys = [r["extra_info"]["index"] for r in part]
    samples = gen.generate([r["prompt"] for r in part], keys)
    cols: dict[str, list] = {"index": [], "sample": [], "response_ids": [], "response": [], "truncated": [], "n_tokens": []}
    for k, ss in zip(keys, samples):
        for j, smp in enumerate(ss):
            cols["index"].append(k)
            cols["sample"].append(j)
            cols["response_ids"].append(smp.response_ids)
            cols["response"].append(smp.text)
            cols["truncated"].append(smp.truncated)
            cols["n_tokens"].append(len(smp.response_ids))
    table = pa.table({"index": pa.array(cols["index"], pa.string()), "sample": pa.array(cols["sample"], pa.int32()),
                      "response_ids": pa.array(cols["response_ids"], pa.list_(pa.int32())),
                      "response": pa.array(cols["response"], pa.string()),
                      "truncated": pa.array(cols["truncated"], pa.bool_()),
                      "n_tokens": pa.array(cols["n_tokens"], pa.int32())})
    write_table(table, path)
    return sum(cols["n_tokens"])


def _todo(st: Stage, shards: list[range], extra=None) -> list[int]:
    return [i for i in range(len(shards)) if not (st.has(i) and (extra is None or extra(i).exists()))]


def run_generate(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None, model=None,
                 actors: int = 0) -> Stage:
    """The generate stage; ``actors > 0`` runs the shards on a Ray Data actor pool instead."""
    if cfg.generate.generator == "vllm" and not actors:  # (Ray actors import it where they run)
        from devenus.select.generate.vllm import import_vllm

        import_vllm()  # a missing vLLM is one line now, before the pool is read
    st = stage(cfg, "generate").open(force)
    rows = pool_rows(cfg)
    shards = _shards(len(rows), cfg.shard_size)
    todo = _todo(st, shards)
    if st.done and not todo:
        return st
    bar = _bar(len(rows), "generate", progress)
    bar.update(sum(len(shards[i]) for i in range(len(shards)) if i not in todo))
    if actors:
        from devenus.select.generate.ray_data import run_shards

        for i in run_shards(cfg, "generate", todo, actors, num_cpus=cfg.generate.actor_cpus,
                            num_gpus=cfg.generate.actor_gpus):
            bar.update(len(shards[i]))
    else:
        gen = make_generator(cfg, model)
        tokens = 0
        for i in todo:
            tokens += generate_shard(cfg, gen, [rows[j] for j in shards[i]], st.shard_path(i))
            bar.update(len(shards[i]))
            bar.set_postfix(tok_s=f"{tokens / max(bar.format_dict['elapsed'], 1e-9):.0f}", refresh=False)
    bar.close()
    st.finish({"questions": len(rows), "shards": len(shards), "samples_per_question": cfg.generate.samples})
    return st


# ------------------------------------------------------------------------------ score
def _questions_path(st: Stage, i: int) -> Path:
    return st.folder / f"questions-{i:05d}.parquet"


def score_shard(cfg: SelectConfig, model_tok, part: list[dict], gen_path: Path, st: Stage, i: int) -> None:
    """Score one shard (its generate output at ``gen_path``); writes the sample and question tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from devenus.select.score import aggregate, answer_signals, forward_signals, uncertainty

    sc, signals = cfg.score, cfg.score.signals
    want_model = [x for x in signals if x in MODEL_SIGNALS]
    gen = pq.read_table(str(gen_path)).to_pydict()
    g = cfg.generate.samples
    n = len(gen["index"])
    if n != g * len(part) or gen["index"][::g] != [r["extra_info"]["index"] for r in part]:
        raise ValueError(f"{gen_path} does not match the pool's questions of shard {i}: rerun generate with --force")
    raw: dict[str, np.ndarray] = {}
    if want_model:
        from devenus.select.generate.hf import HFGenerator

        model, tok = model_tok
        h = HFGenerator(model, tok)
        pids = [tok(h.prompt_text(r["prompt"]))["input_ids"] for r in part]
        steps = None
        if "pivot_trace" in want_model:
            from devenus.select.score import newline_token_ids, step_starts_of

            nl = newline_token_ids(tok)
            steps = [step_starts_of(r, nl) for r in gen["response_ids"]]
        raw = forward_signals(model, [pids[k // g] for k in range(n)], gen["response_ids"], want_model,
                              batch_size=sc.batch_size, token_chunk=sc.token_chunk, vocab_chunk=sc.vocab_chunk,
                              step_starts=steps, pivot_window=sc.pivot_window, pivot_chunk=sc.pivot_chunk)
    s_cols: dict[str, list] = {"index": gen["index"], "sample": gen["sample"], "pred": [], "cluster": [],
                               "agrees": [], "reward": [], "sim_reward": []}
    for name in signals:
        s_cols[f"u_{name}"] = []
    for name in want_model:
        s_cols[name] = raw[name].tolist()
    q_cols: dict[str, list] = {"index": [], "n_samples": [], "pass_rate": [], "majority": [], "majority_ratio": [],
                               "majority_correct": [], "sim_pass_rate": [], "sim_majority_correct": []}
    for name in signals:
        q_cols[f"u_{name}"] = []
    for qi, r in enumerate(part):
        sl = slice(qi * g, (qi + 1) * g)
        target = r["reward_model"]["ground_truth"] if r["extra_info"]["labeled"] else None
        a = answer_signals(gen["response"][sl], gen["truncated"][sl], target)
        hidden = (r.get("simulation") or {}).get("hidden_answer")
        sim = answer_signals(gen["response"][sl], gen["truncated"][sl], hidden) if hidden else None
        agrees = np.asarray(a["agrees"], bool)
        s_cols["pred"] += a["preds"]
        s_cols["cluster"] += a["cluster"]
        s_cols["agrees"] += a["agrees"]
        s_cols["reward"] += a["rewards"].tolist() if a["rewards"] is not None else [None] * g
        s_cols["sim_reward"] += sim["rewards"].tolist() if sim else [None] * g
        q_cols["index"].append(r["extra_info"]["index"])
        q_cols["n_samples"].append(g)
        p = float(a["rewards"].mean()) if a["rewards"] is not None else None
        q_cols["pass_rate"].append(p)
        q_cols["majority"].append(a["majority"])
        q_cols["majority_ratio"].append(a["majority_ratio"])
        q_cols["majority_correct"].append(a["majority_correct"])
        q_cols["sim_pass_rate"].append(float(sim["rewards"].mean()) if sim else None)
        q_cols["sim_majority_correct"].append(sim["majority_correct"] if sim else None)
        for name in signals:
            if name == "accuracy":
                per = (1.0 - a["rewards"]) if a["rewards"] is not None else np.full(g, np.nan)
                q = float("nan") if p is None else 1.0 - p
            elif name == "consistency":
                per, q = a["u_consistency_sample"], a["consistency"]
            else:
                per = uncertainty(name, raw[name][sl])
                q = aggregate(per, sc.aggregation, agrees)
            s_cols[f"u_{name}"] += [None if np.isnan(x) else float(x) for x in per]
            q_cols[f"u_{name}"].append(None if np.isnan(q) else float(q))
    f64 = pa.float64()
    s_types = {"index": pa.string(), "sample": pa.int32(), "pred": pa.string(), "cluster": pa.int32(),
               "agrees": pa.bool_(), "reward": f64, "sim_reward": f64}
    q_types = {"index": pa.string(), "n_samples": pa.int32(), "pass_rate": f64, "majority": pa.string(),
               "majority_ratio": f64, "majority_correct": pa.bool_(), "sim_pass_rate": f64,
               "sim_majority_correct": pa.bool_()}
    # the sample table first: a shard counts as scored once its question table exists
    write_table(pa.table({k: pa.array(v, s_types.get(k, f64)) for k, v in s_cols.items()}), st.shard_path(i))
    write_table(pa.table({k: pa.array(v, q_types.get(k, f64)) for k, v in q_cols.items()}), _questions_path(st, i))


def run_score(cfg: SelectConfig, *, force: bool = False, progress: bool | None = None, model=None,
              actors: int = 0) -> Stage:
    """The score stage; ``actors > 0`` runs the shards on a Ray Data actor pool instead."""
    gen_st = stage(cfg, "generate").check()
    gen_st.require_done("score")
    st = stage(cfg, "score").open(force)
    rows = pool_rows(cfg)
    shards = _shards(len(rows), cfg.shard_size)
    todo = _todo(st, shards, lambda i: _questions_path(st, i))
    if st.done and not todo:
        return st
    bar = _bar(len(rows), "score", progress)
    bar.update(sum(len(shards[i]) for i in range(len(shards)) if i not in todo))
    if actors:
        from devenus.select.generate.ray_data import run_shards

        for i in run_shards(cfg, "score", todo, actors, num_cpus=cfg.generate.actor_cpus,
                            num_gpus=cfg.generate.actor_gpus):
            bar.update(len(shards[i]))
    else:
        model_tok = _model(model, cfg) if any(x in MODEL_SIGNALS for x in cfg.score.signals) else None
        for i in todo:
            score_shard(cfg, model_tok, [rows[j] for j in shards[i]], gen_st.shard_path(i), st, i)
            bar.update(len(shards[i]))
    bar.close()
    st.finish({"questions": len(rows), "shards": len(shards), "signals": list(cfg.score.signals),
               "aggregation": cfg.score.aggregation})
    return st


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
    st = stage(cfg, "route").open(force)
    if st.done and st.has(0):
        return st
    qt = read_questions(score_st)
    keys = qt.column("index").to_pylist()
    cols = {name: _floats(qt.column(name)) for name in qt.column_names
            if name.startswith("u_") or name in ("pass_rate", "majority_correct")}
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
    st.finish({**info, "questions": len(keys), "counts": counts})
    return st


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
        "pool": _pool_identity(cfg), "model": cfg.generate.model, "generation": dataclasses.asdict(cfg.generate),
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
            loaded["m"] = _model(model, cfg)
        return loaded["m"]

    run_generate(cfg, force=force, progress=progress, model=lazy, actors=actors)
    run_score(cfg, force=force, progress=progress, model=lazy, actors=actors)
    run_route(cfg, force=force, progress=progress)
    return run_materialize(cfg, force=force, progress=progress)


def _model(model, cfg: SelectConfig):
    """``(model, tokenizer)`` from a pair, a zero-argument loader, or the config's model name."""
    if model is None:
        return load_model(cfg.generate.model)
    return model() if callable(model) else model
