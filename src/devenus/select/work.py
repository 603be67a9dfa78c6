"""The per-shard units of active selection, shared by the single-process stages
(:mod:`devenus.select.pipeline`) and the Ray Data actors (:mod:`devenus.select.generate.ray_data`):
the pool, the stage identities, the configured generator, and generate/score of one shard.

They live below both runners so that neither imports the other for them (no import cycle): the
pipeline dispatches to the actor pool, and each actor runs these same functions on its shards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from devenus.select.config import MODEL_SIGNALS, SelectConfig
from devenus.select.generate import make_generator  # noqa: F401 (the stages and the Ray actors build it here)
from devenus.select.route.router import get_router
from devenus.select.shards import Stage, write_table
from devenus.select.sources import load_model, model_identity, resolve_pool


# ------------------------------------------------------------------------------ inputs
def pool_path(cfg: SelectConfig) -> Path:
    return resolve_pool(cfg.pool)


def pool_rows(cfg: SelectConfig) -> list[dict]:
    from devenus.records import read_records

    rows = read_records(pool_path(cfg))
    return rows[: cfg.limit] if cfg.limit is not None else rows


def shard_ranges(n: int, size: int) -> list[range]:
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def pool_identity(cfg: SelectConfig) -> dict[str, Any]:
    from devenus.records.versions import parent_of

    p = parent_of(pool_path(cfg))
    return {"pool": p.name, "pool_sha256": p.sha256, "limit": cfg.limit, "shard_size": cfg.shard_size}


def stage(cfg: SelectConfig, name: str) -> Stage:
    # the model's content hash: a folder whose weights changed in place makes new samples
    base = {"input": pool_identity(cfg), **cfg.generate_identity(), "model": model_identity(cfg.generate.model)}
    conf = {"generate": base}
    conf["score"] = {**base, **cfg.score_identity()}
    conf["route"] = {**conf["score"], **cfg.section("route")}
    if get_router(cfg.route.selector).annotates_while_routing:  # the probes' labels are part of the routing
        conf["route"]["annotation"] = cfg.materialize.annotation
    return Stage(Path(cfg.out) / name, name, conf[name])


# ------------------------------------------------------------------------------ generate
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


# ------------------------------------------------------------------------------ score
def questions_path(st: Stage, i: int) -> Path:
    return st.folder / f"questions-{i:05d}.parquet"


def score_shard(cfg: SelectConfig, model_tok, part: list[dict], gen_path: Path, st: Stage, i: int) -> None:
    """Score one shard (its generate output at ``gen_path``); writes the sample and question tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from devenus.select.score import aggregate, answer_signals, forward_signals
    from devenus.select.signal_table import TABLE

    sc, signals = cfg.score, cfg.score.signals
    want_model = [x for x in signals if x in MODEL_SIGNALS]
    gen = pq.read_table(str(gen_path)).to_pydict()
    g = cfg.generate.samples
    n = len(gen["index"])
    if n != g * len(part) or gen["index"][::g] != [r["extra_info"]["index"] for r in part]:
        raise ValueError(f"{gen_path} does not match the pool's questions of shard {i}: rerun generate with --force")
    raw: dict[str, np.ndarray] = {}
    if want_model:
        from devenus.generate.hf import prompt_text

        model, tok = model_tok
        pids = [tok(prompt_text(tok, r["prompt"]))["input_ids"] for r in part]
        steps = None
        if "pivot_trace" in want_model:
            from devenus.select.score import newline_token_ids, step_starts_of

            nl = newline_token_ids(tok)
            steps = [step_starts_of(r, nl) for r in gen["response_ids"]]
        raw = forward_signals(model, [pids[k // g] for k in range(n)], gen["response_ids"], want_model,
                              batch_size=sc.batch_size, max_batch_tokens=sc.max_batch_tokens, token_chunk=sc.token_chunk, vocab_chunk=sc.vocab_chunk,
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
            per, q = TABLE[name].scores(a, p, raw[name][sl] if name in raw else None, g,
                                        lambda v: aggregate(v, sc.aggregation, agrees))
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
    write_table(pa.table({k: pa.array(v, q_types.get(k, f64)) for k, v in q_cols.items()}), questions_path(st, i))


def model_pair(model, cfg: SelectConfig):
    """``(model, tokenizer)`` from a pair, a zero-argument loader, or the config's model name."""
    if model is None:
        return load_model(cfg.generate.model)
    return model() if callable(model) else model
