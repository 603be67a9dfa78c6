"""Evaluation of a checkpoint with the field's protocol: benchmarks prepared from local files,
sampled generation (devenus.generate: HF on the CPU, vLLM on GPUs), avg@k / pass@k / maj@k with bootstrap intervals,
and the ``devenus eval`` command (``devenus.evaluate.cli``). verl-free: a verl checkpoint is merged
by ``devenus.adapters.verl.checkpoint``, imported only when one is given."""
