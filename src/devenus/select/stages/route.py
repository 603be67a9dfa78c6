"""The route stage: one decision per question (annotate, weak, keep, discard) by the configured router
(:mod:`devenus.select.route.router`) from the score stage's question tables, written as
``<out>/route/shard-00000.parquet`` (``index``, ``decision``, ``u``, ``rank``: 0 = most uncertain, ``label``:
a triage probe's annotation)."""

from __future__ import annotations

from typing import Any

import numpy as np

from devenus.select.config import RANDOM, SelectConfig
from devenus.select.route.router import get_router
from devenus.select.run import SelectionRun
from devenus.select.shards import Stage, StageError, write_table
from devenus.select.stages.score import read_questions


def route_scores(q: dict[str, np.ndarray], keys: list[str], cfg: SelectConfig,
                 probe_oracle=None) -> tuple[np.ndarray, dict[str, Any]]:
    """Decisions per question from per-question columns (``u_<signal>``, ``pass_rate``,
    ``majority_correct``) by the configured router (:mod:`devenus.select.route.router`): vectorised, the
    core of the route stage (and of its benchmark).

    ``probe_oracle(indices) -> (pass_rate, majority_correct, labels)`` annotates a router's probes.
    The returned info holds ``u`` (after any sign flip) and, for triage, ``probes`` and ``labels``."""
    from devenus.select.route import tiebreak
    from devenus.select.route.router import RouteInputs

    r = cfg.route
    # random: every question equally uncertain, so the seeded tie-breaker alone orders them
    u = np.zeros(len(keys)) if r.signal == RANDOM else np.asarray(q[f"u_{r.signal}"], dtype=np.float64)
    info: dict[str, Any] = {"signal": r.signal, "aggregation": cfg.score.aggregation, "selector": r.selector,
                            "seed": r.seed, "sign": 1}
    ties = tiebreak(keys, r.seed)
    dec, u = get_router(r.selector).route(RouteInputs(q, keys, u, ties, r, probe_oracle), info)
    return dec, {**info, "u": u, "ties": ties}


def probe_oracle(run: SelectionRun, score_st: Stage, keys: list[str], majority: list):
    """Annotate triage probes with the configured source and grade the existing G samples against
    the annotations: ``indices -> (pass rate, majority correct, labels)``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devenus.select.annotate import annotation_source
    from devenus.verify import get_default_verifier

    def oracle(idx):
        want = [keys[i] for i in idx]
        by_key = {r["extra_info"]["index"]: r for r in run.rows}
        labels = annotation_source(run.cfg.materialize.annotation)([by_key[k] for k in want])
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


def scatter(n: int, at: np.ndarray, values):
    """An array of length ``n`` of ``values``' type: ``values`` at positions ``at``, null elsewhere."""
    import pyarrow as pa

    pos = np.full(n, -1, dtype=np.int64)
    pos[at] = np.arange(len(at))
    return values.take(pa.array(pos, mask=pos < 0))


def _route_table(qt, dec: np.ndarray, u: np.ndarray, ties: np.ndarray, probes, labels):
    """The stage's table: decision, routing score, uncertainty rank and any probe label per question."""
    import pyarrow as pa

    from devenus.select.route import DECISIONS, uncertainty_order

    n = qt.num_rows
    label = scatter(n, np.asarray(probes, dtype=np.int64), pa.array(list(labels), pa.string()))
    rank = np.empty(n, dtype=np.int64)  # 0 = the most uncertain
    rank[uncertainty_order(np.nan_to_num(u, nan=-np.inf), ties)] = np.arange(n)
    return pa.table({"index": qt.column("index").combine_chunks().cast(pa.string()),
                     "decision": pa.array(np.asarray(DECISIONS, dtype=object)[dec], pa.string()),
                     "u": pa.array(u, pa.float64()), "rank": pa.array(rank, pa.int64()), "label": label})


def run_route(run: SelectionRun | SelectConfig, *, force: bool = False, progress: bool | None = None) -> Stage:
    """The route stage (one shard: routing ranks the whole pool)."""
    from devenus.select.route import DECISIONS

    run = SelectionRun.of(run)
    cfg = run.cfg
    score_st = run.stage("score").check().require_done("route")
    qt = read_questions(score_st)
    keys = qt.column("index").to_pylist()
    cols = {name: _floats(qt.column(name)) for name in qt.column_names
            if name.startswith("u_") or name in ("pass_rate", "majority_correct")}
    warning = _check_signal(cfg, cols)  # before the stage folder is touched: a refusal leaves nothing
    st = run.stage("route").open(force)
    if st.done and st.has(0):
        return st
    oracle = (probe_oracle(run, score_st, keys, qt.column("majority").to_pylist())
              if get_router(cfg.route.selector).annotates_while_routing else None)
    dec, info = route_scores(cols, keys, cfg, oracle)
    u, ties = info.pop("u"), info.pop("ties")
    write_table(_route_table(qt, dec, u, ties, info.pop("probes", []), info.pop("labels", [])), st.shard_path(0))
    counts = {name: int((dec == code).sum()) for code, name in enumerate(DECISIONS)}
    extra = {"signal_warning": warning} if warning else {}
    st.finish({**info, "questions": len(keys), "counts": counts, **extra,
               "demoted_labels": _demoted_labels(run, keys, dec)})
    return st


def _check_signal(cfg: SelectConfig, cols: dict[str, np.ndarray]) -> str | None:
    """Refuse (or, with ``route.on_constant_signal=warn``, return the warning for) a routing signal that does
    not vary over the pool, when the configured router ranks by it (:func:`~devenus.select.route.router.uninformative`)."""
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


def _demoted_labels(run: SelectionRun, keys: list[str], dec: np.ndarray) -> dict[str, Any]:
    """How many rows with a trusted label lose it by this routing (``weak``: the label withheld; ``discard``:
    the row left out), and why: what the manifest and the console report."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devenus.select.route import DISCARD, WEAK

    extra = run.pool_table.column("extra_info")
    labeled = pc.fill_null(pc.struct_field(extra, "labeled"), False)
    at = pc.index_in(pa.array(keys, pa.string()), value_set=pc.struct_field(extra, "index"))
    gold = pc.fill_null(labeled.take(at), False).to_numpy(zero_copy_only=False)
    weak, gone = int((gold & (dec == WEAK)).sum()), int((gold & (dec == DISCARD)).sum())
    r = run.cfg.route
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
