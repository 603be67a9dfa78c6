"""The score stage: each generated sample's answer, reward and uncertainty signals, and their per-question
aggregates. Per shard, ``<out>/score/shard-*.parquet`` (one row per sample) and then
``<out>/score/questions-*.parquet`` (one row per question); a shard counts as scored once its question
table exists. The signals themselves are :mod:`devenus.select.score`'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from devenus.select.config import MODEL_SIGNALS, SelectConfig
from devenus.select.run import SelectionRun
from devenus.select.shards import Stage, write_table
from devenus.select.stages.sharded import run_sharded


def questions_path(st: Stage, i: int) -> Path:
    return st.folder / f"questions-{i:05d}.parquet"


def read_questions(st: Stage):
    """The question tables of a score stage, concatenated in shard order."""
    return st.read_all(table="questions")


def _generated(path: Path, part: list[dict], g: int, i: int) -> dict[str, list]:
    """Shard ``i``'s generate output, checked against the pool's questions of that shard."""
    import pyarrow.parquet as pq

    gen = pq.read_table(str(path)).to_pydict()
    if len(gen["index"]) != g * len(part) or gen["index"][::g] != [r["extra_info"]["index"] for r in part]:
        raise ValueError(f"{path} does not match the pool's questions of shard {i}: rerun generate with --force")
    return gen


def _model_scores(cfg: SelectConfig, model_tok, part: list[dict], gen: dict[str, list],
                  want: list[str]) -> dict[str, np.ndarray]:
    """The model-internal signals ``want`` of every sample, from one teacher-forced forward per batch."""
    from devenus.generate.hf import prompt_text
    from devenus.select.score import forward_signals, newline_token_ids, step_starts_of

    sc, g = cfg.score, cfg.generate.samples
    model, tok = model_tok
    pids = [tok(prompt_text(tok, r["prompt"]))["input_ids"] for r in part]
    steps = None
    if "pivot_trace" in want:
        nl = newline_token_ids(tok)
        steps = [step_starts_of(r, nl) for r in gen["response_ids"]]
    return forward_signals(model, [pids[k // g] for k in range(len(gen["index"]))], gen["response_ids"], want,
                           batch_size=sc.batch_size, max_batch_tokens=sc.max_batch_tokens, token_chunk=sc.token_chunk,
                           vocab_chunk=sc.vocab_chunk, step_starts=steps, pivot_window=sc.pivot_window,
                           pivot_chunk=sc.pivot_chunk)


def _columns(cfg: SelectConfig, part: list[dict], gen: dict[str, list],
             raw: dict[str, np.ndarray]) -> tuple[dict[str, list], dict[str, list]]:
    """The sample table's and the question table's columns: answers, rewards (against the label and, where
    the pool keeps one, the simulation answer), the vote, and each signal per sample and per question."""
    from devenus.select.score import aggregate, answer_signals
    from devenus.select.signal_table import TABLE

    signals, g = cfg.score.signals, cfg.generate.samples
    s = {"index": gen["index"], "sample": gen["sample"], "pred": [], "cluster": [], "agrees": [], "reward": [],
         "sim_reward": [], **{f"u_{name}": [] for name in signals}, **{name: v.tolist() for name, v in raw.items()}}
    q = {"index": [], "n_samples": [], "pass_rate": [], "majority": [], "majority_ratio": [], "majority_correct": [],
         "sim_pass_rate": [], "sim_majority_correct": [], **{f"u_{name}": [] for name in signals}}
    for qi, r in enumerate(part):
        sl = slice(qi * g, (qi + 1) * g)
        target = r["reward_model"]["ground_truth"] if r["extra_info"]["labeled"] else None
        a = answer_signals(gen["response"][sl], gen["truncated"][sl], target)
        hidden = (r.get("simulation") or {}).get("hidden_answer")
        sim = answer_signals(gen["response"][sl], gen["truncated"][sl], hidden) if hidden else None
        agrees = np.asarray(a["agrees"], bool)
        s["pred"] += a["preds"]
        s["cluster"] += a["cluster"]
        s["agrees"] += a["agrees"]
        s["reward"] += a["rewards"].tolist() if a["rewards"] is not None else [None] * g
        s["sim_reward"] += sim["rewards"].tolist() if sim else [None] * g
        p = float(a["rewards"].mean()) if a["rewards"] is not None else None
        for key, value in (("index", r["extra_info"]["index"]), ("n_samples", g), ("pass_rate", p),
                           ("majority", a["majority"]), ("majority_ratio", a["majority_ratio"]),
                           ("majority_correct", a["majority_correct"]),
                           ("sim_pass_rate", float(sim["rewards"].mean()) if sim else None),
                           ("sim_majority_correct", sim["majority_correct"] if sim else None)):
            q[key].append(value)
        for name in signals:
            per, u = TABLE[name].scores(a, p, raw[name][sl] if name in raw else None, g,
                                        lambda v: aggregate(v, cfg.score.aggregation, agrees))
            s[f"u_{name}"] += [None if np.isnan(x) else float(x) for x in per]
            q[f"u_{name}"].append(None if np.isnan(u) else float(u))
    return s, q


def _write(st: Stage, i: int, s_cols: dict[str, list], q_cols: dict[str, list]) -> None:
    import pyarrow as pa

    f64 = pa.float64()
    s_types = {"index": pa.string(), "sample": pa.int32(), "pred": pa.string(), "cluster": pa.int32(),
               "agrees": pa.bool_(), "reward": f64, "sim_reward": f64}
    q_types = {"index": pa.string(), "n_samples": pa.int32(), "pass_rate": f64, "majority": pa.string(),
               "majority_ratio": f64, "majority_correct": pa.bool_(), "sim_pass_rate": f64,
               "sim_majority_correct": pa.bool_()}
    # the sample table first: a shard counts as scored once its question table exists
    write_table(pa.table({k: pa.array(v, s_types.get(k, f64)) for k, v in s_cols.items()}), st.shard_path(i))
    write_table(pa.table({k: pa.array(v, q_types.get(k, f64)) for k, v in q_cols.items()}), questions_path(st, i))


def score_shard(run: SelectionRun, model_tok, st: Stage, i: int) -> None:
    """Score shard ``i`` of ``run`` (its generate output); writes the sample and the question table into ``st``."""
    cfg = run.cfg
    part = run.part(i)
    gen = _generated(run.stage("generate").shard_path(i), part, cfg.generate.samples, i)
    want = [x for x in cfg.score.signals if x in MODEL_SIGNALS]
    raw = _model_scores(cfg, model_tok, part, gen, want) if want else {}
    _write(st, i, *_columns(cfg, part, gen, raw))


class ScoreWork:
    """Score shard ``i`` of a run: ``work(i)``; the model is loaded (once per run) only for model signals."""

    def __init__(self, run: SelectionRun, st: Stage):
        self.run, self.st = run, st
        self.model_tok = run.load_model() if any(x in MODEL_SIGNALS for x in run.cfg.score.signals) else None

    def __call__(self, i: int) -> None:
        score_shard(self.run, self.model_tok, self.st, i)

    def close(self) -> None:
        pass


def run_score(run: SelectionRun | SelectConfig, *, force: bool = False, progress: bool | None = None, model=None,
              actors: int = 0) -> Stage:
    """The score stage; ``actors > 0`` runs the shards on a Ray Data actor pool instead."""
    run = SelectionRun.of(run, model)
    run.stage("generate").check().require_done("score")
    # a shard counts as scored once its question table exists (written after the sample table)
    return run_sharded(run, "score", force=force, progress=progress, actors=actors,
                           shard_done=lambda st, i: questions_path(st, i).exists(),
                           summary={"signals": list(run.cfg.score.signals), "aggregation": run.cfg.score.aggregation})
