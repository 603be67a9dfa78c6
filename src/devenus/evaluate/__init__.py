"""Evaluation of a checkpoint with the field's protocol: benchmarks prepared from local files,
sampled generation (devenus.generate: HF on the CPU, vLLM on GPUs), avg@k / pass@k / maj@k with bootstrap intervals,
and the ``devenus eval`` command (``devenus.evaluate.cli``). verl-free: a verl checkpoint is merged
by ``devenus.adapters.verl.checkpoint``, imported only when one is given."""

from devenus.evaluate.benchmarks import BENCHMARKS, PROTOCOLS, Benchmark, BenchmarkError, Item, Protocol, prepare
from devenus.evaluate.metrics import Interval, avg_score, bootstrap_interval, majority_correct, pass_at_k
from devenus.evaluate.run import EvalResult, evaluate

__all__ = [
    "BENCHMARKS", "PROTOCOLS", "Benchmark", "BenchmarkError", "Item", "Protocol", "prepare",
    "Interval", "avg_score", "bootstrap_interval", "majority_correct", "pass_at_k",
    "EvalResult", "evaluate",
]
