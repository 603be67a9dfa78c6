"""Sampling with vLLM on GPUs: the :class:`~devenus.select.generate.Generator` interface of the HF
generator, for pools where CPU generation is too slow.

vLLM is an optional extra (``pip install 'devenus[vllm]'``) and is imported only when a
:class:`VLLMGenerator` is built: importing this module (or ``devenus.select``) never imports it.

Per question, one request draws all G samples (``SamplingParams(n=G, seed=...)``) with a seed derived
from the run's seed and the question key only, so a question's samples do not depend on which
questions share its batch and a rerun reproduces them (on the same vLLM build and GPU). The streams
differ from the HF generator's (another sampler), so the two generators give different samples for
the same seed; the schema and the meaning of every column are the same:

- ``response_ids`` the generated tokens with the EOS token when one was produced (vLLM keeps it in
  ``token_ids``; :func:`to_samples` appends it where a build leaves it out, so the score stage
  teacher-forces the same sequence either way);
- ``text`` decoded by the model's tokenizer with special tokens skipped, like the HF generator;
- ``truncated`` ``finish_reason == "length"``: hit ``max_new_tokens``, no answer.

Prompts go to vLLM as token ids made by the same chat template and tokenizer call as the HF generator
and the score stage (a prompt string would be tokenized again by vLLM, with a second BOS on some
models).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

from devenus.select.generate.base import Sample

INSTALL_HINT = "pip install 'devenus[vllm]' (on a machine with a GPU build of torch)"


class VLLMUnavailable(ImportError, ValueError):
    """vLLM is not installed. A ValueError too, so the command line shows it as one ``error:`` line."""


def import_vllm():
    """The ``vllm`` module, or :class:`VLLMUnavailable` with the install hint."""
    try:
        import vllm
    except ImportError as exc:
        raise VLLMUnavailable(f"generate.generator=vllm needs vLLM, which is not installed: {INSTALL_HINT}; "
                              "or use generate.generator=hf") from exc
    return vllm


def question_seed(seed: int, key: str) -> int:
    """The seed of one question's request: from the run seed and the key only. 31 bits, a range every
    vLLM sampler accepts."""
    return int.from_bytes(hashlib.sha256(f"vllm\0{seed}\0{key}".encode()).digest()[:8], "little") & 0x7FFFFFFF


def to_samples(request_output: Any, samples: int, eos_token_ids: Sequence[int],
               decode: Callable[[list[int]], str] | None = None) -> list[Sample]:
    """One vLLM ``RequestOutput`` (``.outputs``: ``CompletionOutput`` with ``index``, ``token_ids``,
    ``text``, ``finish_reason``) as our :class:`Sample` rows, in sample order.

    ``decode(ids)`` gives the text (the HF generator's decoding); without it vLLM's own ``text`` is kept.
    Raises ValueError if the request did not return ``samples`` finished completions."""
    outs = sorted(request_output.outputs, key=lambda o: o.index)
    rid = getattr(request_output, "request_id", "?")
    if len(outs) != samples or [o.index for o in outs] != list(range(samples)):
        raise ValueError(f"vLLM request {rid} returned completions {[o.index for o in outs]}, expected 0..{samples - 1}")
    eos = set(int(t) for t in eos_token_ids)
    out = []
    for o in outs:
        ids = [int(t) for t in o.token_ids]
        if o.finish_reason == "length":
            truncated = True
        elif o.finish_reason == "stop":
            truncated = False
            if eos and (not ids or ids[-1] not in eos):
                ids.append(min(eos))  # an EOS stop some builds leave out of token_ids
        else:
            raise ValueError(f"vLLM request {rid}, sample {o.index}: unexpected finish_reason {o.finish_reason!r} "
                             "(expected 'stop' or 'length')")
        out.append(Sample(ids, decode(ids) if decode is not None else o.text, truncated=truncated))
    return out


class VLLMGenerator:
    """``VLLMGenerator(model_dir, samples=8, temperature=1.0, top_p=1.0, max_new_tokens=96, seed=0, ...)``.

    ``llm``: an engine to use instead of building ``vllm.LLM(model_dir, ...)`` (tests, or a caller that
    holds one already). The engine is built on first use, so constructing the generator is cheap;
    :meth:`close` shuts down an engine the generator built and frees its GPU memory."""

    def __init__(self, model_dir: str, *, samples: int = 8, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 96, seed: int = 0, gpu_memory_utilization: float = 0.85,
                 tensor_parallel_size: int = 1, max_model_len: int | None = None, llm: Any = None,
                 tokenizer: Any = None):
        if llm is None:
            import_vllm()  # fail here, before any work, with the install hint
        self.model_dir = str(model_dir)
        self.samples, self.temperature, self.top_p = samples, temperature, top_p
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.engine_kw = {"gpu_memory_utilization": gpu_memory_utilization,
                          "tensor_parallel_size": tensor_parallel_size, "max_model_len": max_model_len}
        self._llm, self._tok = llm, tokenizer
        self._owns_llm = llm is None

    @property
    def llm(self):
        if self._llm is None:
            vllm = import_vllm()
            # the engine's own seed only matters for requests without one; every request here has one
            self._llm = vllm.LLM(model=self.model_dir, seed=self.seed, **self.engine_kw)
        return self._llm

    def close(self) -> None:
        """Shut the engine down and free its GPU memory (the engine takes ``gpu_memory_utilization`` of the
        GPU; in one process the score stage loads the HF scorer on that GPU next). In this order: vLLM's own
        shutdown (``LLM.shutdown()`` where the build has one, else its engine-core client's, which ends the
        engine-core process holding the weights and KV cache), the last reference dropped, vLLM's
        distributed state and memory (``cleanup_dist_env_and_memory``), then ``gc`` and the CUDA cache for
        what is left in this process. An engine passed in by the caller is only let go. A later
        :meth:`generate` builds a new engine."""
        llm, self._llm = self._llm, None
        if llm is None or not self._owns_llm:
            return
        stop = getattr(llm, "shutdown", None) or getattr(getattr(llm.llm_engine, "engine_core", None), "shutdown")
        stop()
        del llm, stop
        import gc

        import torch

        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
        gc.collect()
        torch.cuda.empty_cache()  # a no-op where CUDA was never initialised

    @property
    def tok(self):
        if self._tok is None:
            self._tok = self.llm.get_tokenizer()
        return self._tok

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        text = self.tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return list(self.tok(text)["input_ids"])

    def eos_token_ids(self) -> list[int]:
        eos = self.tok.eos_token_id
        return [] if eos is None else [int(eos)]

    def sampling_params(self, key: str):
        vllm = import_vllm()
        return vllm.SamplingParams(n=self.samples, temperature=self.temperature, top_p=self.top_p,
                                   max_tokens=self.max_new_tokens, seed=question_seed(self.seed, key))

    def generate(self, prompts: Sequence[list[dict]], keys: Sequence[str]) -> list[list[Sample]]:
        if len(prompts) != len(keys):
            raise ValueError(f"{len(prompts)} prompts but {len(keys)} keys")
        if not prompts:
            return []
        requests = [{"prompt_token_ids": self.prompt_ids(p)} for p in prompts]
        params = [self.sampling_params(k) for k in keys]
        results = self.llm.generate(requests, params, use_tqdm=False)
        if len(results) != len(prompts):
            raise ValueError(f"vLLM returned {len(results)} results for {len(prompts)} prompts")
        eos = self.eos_token_ids()

        def decode(ids):
            return self.tok.decode(ids, skip_special_tokens=True)

        return [to_samples(r, self.samples, eos, decode) for r in results]
