"""Run a protocol: generate k samples per question, grade them, compute the metrics and intervals."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from devenus.generate import Backend, Sample, Sampling
from devenus.evaluate.benchmarks import Item, Protocol
from devenus.evaluate.metrics import (
    Interval,
    avg_score,
    bootstrap_interval,
    bootstrap_macro_interval,
    majority_correct,
    normal_half_width,
    pass_at_k,
)

__all__ = ["QuestionResult", "BenchmarkResult", "EvalResult", "score_benchmark", "evaluate", "summarize"]


@dataclass(frozen=True)
class QuestionResult:
    key: str
    target: str
    preds: tuple[str | None, ...]
    scores: tuple[float, ...]
    responses: tuple[str, ...] = ()  # the completions' texts (kept for samples.jsonl)
    truncated: tuple[bool, ...] = ()

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def correct(self) -> int:
        return int(sum(s > 0.5 for s in self.scores))


@dataclass
class BenchmarkResult:
    name: str
    group: str
    k: int
    headline: str
    questions: list[QuestionResult]
    metrics: dict = field(default_factory=dict)  # filled by summarize()
    seconds: float = 0.0

    @property
    def headline_per_question(self) -> list[float]:
        # avg@k and pass@1 are the same per-question number (the mean grade): pass@1 is avg@1
        return [avg_score(q.scores) for q in self.questions]


@dataclass
class EvalResult:
    protocol: str
    sampling: Sampling
    model: str
    backend: str
    benchmarks: list[BenchmarkResult]
    averages: dict = field(default_factory=dict)  # "ID"/"OOD" -> interval dict and members
    seconds: float = 0.0


def grade_samples(item: Item, completions: Sequence[Sample], verifier=None) -> QuestionResult:
    from devenus.verify import grade

    res = [grade(c.text, item.target, verifier=verifier, truncated=c.truncated) for c in completions]
    return QuestionResult(item.key, item.target, tuple(r.pred for r in res), tuple(r.score for r in res),
                          tuple(c.text for c in completions), tuple(c.truncated for c in completions))


def score_benchmark(name: str, headline: str, questions: list[QuestionResult], n_boot: int = 2000, seed: int = 0,
                    verifier=None) -> dict:
    """avg@k, pass@1, pass@k and maj@k of one benchmark, each with a bootstrap interval over questions."""
    if not questions:
        raise ValueError(f"{name}: no questions to score")
    k = min(q.n for q in questions)
    per_q = {  # (k = 1: pass@k is pass@1, one key)
        f"avg@{k}": [avg_score(q.scores) for q in questions],
        "pass@1": [pass_at_k(q.n, q.correct, 1) for q in questions],
        f"pass@{k}": [pass_at_k(q.n, q.correct, k) for q in questions],
        f"maj@{k}": [majority_correct(q.preds, q.scores, verifier) for q in questions],
    }
    out: dict = {metric: {**bootstrap_interval(vals, n_boot, seed).as_dict(), "normal_ci95": normal_half_width(vals)}
                 for metric, vals in per_q.items()}
    out["headline"] = f"avg@{k}" if headline == "avg@k" else "pass@1"
    out["k"] = k
    out["n_questions"] = len(questions)
    samples = sum(q.n for q in questions)
    out["abstain_rate"] = sum(p is None for q in questions for p in q.preds) / samples
    # samples that hit the token limit (a share of the no-answer ones): high means raise --max-new-tokens
    out["truncated_rate"] = sum(bool(t) for q in questions for t in q.truncated) / samples
    return out


def summarize(results: list[BenchmarkResult], n_boot: int = 2000, seed: int = 0, verifier=None) -> dict:
    """Fill each benchmark's metrics and return the ID / OOD averages (unweighted over benchmarks)."""
    for r in results:
        r.metrics = score_benchmark(r.name, r.headline, r.questions, n_boot, seed, verifier)
    averages = {}
    for group in ("ID", "OOD"):
        members = [r for r in results if r.group == group]
        if not members:
            continue
        iv: Interval = bootstrap_macro_interval([r.headline_per_question for r in members], n_boot, seed)
        averages[group] = {**iv.as_dict(), "benchmarks": [r.name for r in members]}
    return averages


def evaluate(
    backend: Backend,
    protocol: Protocol,
    items: dict[str, list[Item]],
    sampling: Sampling,
    n_boot: int = 2000,
    k_override: dict[str, int] | None = None,
    progress: Callable[[str, int], Callable[[int], None]] | None = None,
    model: str = "",
) -> EvalResult:
    """Generate, grade and score every benchmark of ``protocol`` whose items are given.

    ``progress(name, total)`` may return a callback that receives finished-question counts."""
    t0 = time.perf_counter()
    results = []
    for bench in protocol.benchmarks:
        if bench.name not in items:
            continue
        k = (k_override or {}).get(bench.name, bench.k)
        qs = items[bench.name]
        tick = progress(bench.name, len(qs)) if progress else None
        t = time.perf_counter()
        # a sample is drawn from (seed, benchmark and question key, sample index): dropping one benchmark or
        # question does not change another's samples
        comps = backend.generate([it.messages for it in qs], [f"{bench.name}/{it.key}" for it in qs], k, sampling, tick)
        graded = [grade_samples(it, c) for it, c in zip(qs, comps)]
        results.append(BenchmarkResult(bench.name, bench.group, k, bench.headline, graded,
                                       seconds=time.perf_counter() - t))
    averages = summarize(results, n_boot, sampling.seed)
    return EvalResult(protocol.name, sampling, model, getattr(backend, "name", "?"), results, averages,
                      time.perf_counter() - t0)
