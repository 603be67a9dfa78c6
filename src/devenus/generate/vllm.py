"""``vllm``: vLLM on GPUs, behind the :class:`~devenus.generate.Backend` interface of the HF backend.

Never run on a GPU in this project: checked against a recorded stand-in engine only (tests/select/test_vllm.py).
vLLM is an optional extra (``pip install 'devenus[vllm]'``) and is imported only when a
:class:`VLLMBackend` is built or used: importing this module never imports it.

Per prompt, one request draws all ``n`` samples (``SamplingParams(n=n, seed=request_seed(seed, key))``),
so a prompt's samples depend on the seed and its key only, not on which prompts share the call, and a
rerun reproduces them (on the same vLLM build and GPU). The streams differ from the HF backend's (another
sampler): the two give different samples for the same seed; every field means the same:

- ``response_ids`` the generated tokens with the EOS token when one was produced (:func:`to_samples`
  appends it where a build leaves it out, so a teacher-forced pass sees the same sequence either way);
- ``text`` decoded by the model's tokenizer with special tokens skipped, like the HF backend;
- ``truncated`` ``finish_reason == "length"``: hit ``max_new_tokens``, no answer.

Prompts go to vLLM as token ids made by the same chat template and tokenizer call as the HF backend (a
prompt string would be tokenized again by vLLM, with a second BOS on some models).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from devenus.generate import Sample, Sampling, row_seed

INSTALL_HINT = "pip install 'devenus[vllm]' (on a machine with a GPU build of torch)"


class VLLMUnavailable(ImportError, ValueError):
    """vLLM is not installed. A ValueError too, so the command line shows it as one ``error:`` line."""


def import_vllm():
    """The ``vllm`` module, or :class:`VLLMUnavailable` with the install hint."""
    try:
        import vllm
    except ImportError as exc:
        raise VLLMUnavailable(f"the vllm generation backend needs vLLM, which is not installed: {INSTALL_HINT}; "
                              "or use the hf backend") from exc
    return vllm


def request_seed(seed: int, key: str) -> int:
    """The seed of one prompt's request (its ``n`` samples): :func:`~devenus.generate.row_seed` of sample 0,
    cut to 31 bits, a range every vLLM sampler accepts."""
    return row_seed(seed, key, 0) & 0x7FFFFFFF


def to_samples(request_output: Any, n: int, eos_token_ids: Sequence[int],
               decode: Callable[[list[int]], str] | None = None) -> list[Sample]:
    """One vLLM ``RequestOutput`` (``.outputs``: ``CompletionOutput`` with ``index``, ``token_ids``,
    ``text``, ``finish_reason``) as :class:`Sample` rows, in sample order.

    ``decode(ids)`` gives the text (the HF backend's decoding); without it vLLM's own ``text`` is kept.
    Raises ValueError if the request did not return ``n`` finished completions."""
    outs = sorted(request_output.outputs, key=lambda o: o.index)
    rid = getattr(request_output, "request_id", "?")
    if len(outs) != n or [o.index for o in outs] != list(range(n)):
        raise ValueError(f"vLLM request {rid} returned completions {[o.index for o in outs]}, expected 0..{n - 1}")
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


class VLLMBackend:
    """``VLLMBackend(model_dir, gpu_memory_utilization=0.85, tensor_parallel_size=1, max_model_len=None, seed=0)``.

    ``llm``: an engine to use instead of building ``vllm.LLM(model_dir, ...)`` (tests, or a caller that holds
    one already). The engine is built on first use, so constructing the backend is cheap; :meth:`close`
    shuts down an engine the backend built and frees its GPU memory."""

    name = "vllm"
    options = ("gpu_memory_utilization", "tensor_parallel_size", "max_model_len", "seed", "llm", "tokenizer")

    def __init__(self, model_dir: Any, *, gpu_memory_utilization: float = 0.85, tensor_parallel_size: int = 1,
                 max_model_len: int | None = None, seed: int = 0, llm: Any = None, tokenizer: Any = None):
        if llm is None:
            import_vllm()  # fail here, before any work, with the install hint
        self.model_dir = str(model_dir)
        self.seed = seed
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
    def tokenizer(self):
        if self._tok is None:
            self._tok = self.llm.get_tokenizer()
        return self._tok

    def prompt_ids(self, messages: Sequence[dict]) -> list[int]:
        from devenus.generate.hf import prompt_text  # noqa: PLC0415 (the same template call as the HF backend)

        return list(self.tokenizer(prompt_text(self.tokenizer, messages))["input_ids"])

    def sampling_params(self, key: str, n: int, sampling: Sampling):
        # top_k only where one is set: the default is the whole vocabulary in every vLLM build
        top_k = {"top_k": sampling.top_k} if sampling.top_k > 0 else {}
        return import_vllm().SamplingParams(n=n, temperature=sampling.temperature, top_p=sampling.top_p,
                                            max_tokens=sampling.max_new_tokens,
                                            seed=request_seed(sampling.seed, str(key)), **top_k)

    def generate(self, prompts, keys, n, sampling: Sampling, progress=None) -> list[list[Sample]]:
        if len(prompts) != len(keys):
            raise ValueError(f"{len(prompts)} prompts but {len(keys)} keys")
        if not prompts:
            return []
        requests = [{"prompt_token_ids": self.prompt_ids(p)} for p in prompts]
        params = [self.sampling_params(k, n, sampling) for k in keys]
        results = self.llm.generate(requests, params, use_tqdm=progress is not None)
        if len(results) != len(prompts):
            raise ValueError(f"vLLM returned {len(results)} results for {len(prompts)} prompts")
        if progress:
            progress(len(prompts))
        eos = self.tokenizer.eos_token_id
        decode = functools.partial(self.tokenizer.decode, skip_special_tokens=True)
        return [to_samples(r, n, [] if eos is None else [int(eos)], decode) for r in results]
