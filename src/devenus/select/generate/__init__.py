"""Generators: G sampled responses per question behind one interface (:class:`Generator`).

- :mod:`.hf` Hugging Face on the CPU (the default): batched, KV cache, seeded per (question, sample).
- :mod:`.vllm` vLLM on GPUs (``generate.generator: vllm``; the optional extra ``devenus[vllm]``): all G
  samples of a question in one seeded request. Imported only when chosen: this package never imports vllm.
- :mod:`.ray_data` either of them as a Ray Data ``map_batches`` actor pool over the shards.
"""

from __future__ import annotations

from devenus.select.generate.base import Generator, Sample
from devenus.select.generate.hf import HFGenerator, sample_seed

__all__ = ["Generator", "HFGenerator", "Sample", "sample_seed"]
