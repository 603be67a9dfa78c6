"""Generation backends behind one interface: ``generate(items' messages, n, sampling) -> completions``.

- :class:`HFBackend`: Hugging Face ``model.generate`` on the CPU (or any torch device): batched, left
  padded, KV cache, the tokenizer's chat template (the prompt verl's ``RLHFDataset`` builds), plain
  temperature / top-p sampling (no top-k, as verl's ``val_kwargs`` default). Seeded per batch from
  ``(seed, batch index)``, so a rerun with the same seed and batch size reproduces every sample.
- :class:`VLLMBackend`: vLLM on GPUs, imported only when built; one ``LLM.generate`` call over all
  prompts with ``n`` samples each and a per-request seed derived from ``seed``.

A completion is its text (special tokens removed) and whether it was truncated (hit the token limit
without EOS): a truncated completion has no answer, as in training (``devenus.verify.grade``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from devenus.registry import Registry

__all__ = ["BACKENDS", "Completion", "Sampling", "Backend", "HFBackend", "VLLMBackend", "make_backend"]


@dataclass(frozen=True)
class Completion:
    text: str
    truncated: bool


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int = 0


class Backend(Protocol):
    name: str

    def generate(self, prompts: Sequence[Sequence[dict]], n: int, sampling: Sampling,
                 progress: Callable[[int], None] | None = None) -> list[list[Completion]]:
        """``n`` completions for each chat prompt; ``progress(k)`` is called as k more prompts finish."""
        ...


class HFBackend:
    name = "hf"
    #: the make_backend keywords it takes
    options = ("batch_size", "device", "dtype")

    def __init__(self, model_dir: str, batch_size: int = 256, device: str = "cpu", dtype: str = "float32"):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_dir = str(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        # a merged verl checkpoint is stored in bf16; computing in fp32 keeps the CPU path exact and fast
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=getattr(torch, dtype)).to(device)
        self.model.eval()
        self.device = device
        self.batch_size = batch_size
        eos = self.tokenizer.eos_token_id
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        ids = [eos] + (list(gen_eos) if isinstance(gen_eos, (list, tuple)) else [gen_eos])
        self.eos_ids = sorted({int(i) for i in ids if i is not None})
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_ids[0]

    def prompt_ids(self, messages: Sequence[dict]) -> list[int]:
        if not getattr(self.tokenizer, "chat_template", None):
            # a tokenizer without a chat template: the messages' text, one per line (as a plain LM sees it)
            return list(self.tokenizer("\n".join(m["content"] for m in messages))["input_ids"])
        ids = self.tokenizer.apply_chat_template(list(messages), tokenize=True, add_generation_prompt=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)

    def generate(self, prompts, n, sampling, progress=None):
        import torch
        from transformers import GenerationConfig

        flat = [self.prompt_ids(m) for m in prompts for _ in range(n)]
        do_sample = sampling.temperature > 0
        cfg = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=do_sample,
            temperature=sampling.temperature if do_sample else 1.0,
            top_p=sampling.top_p if do_sample else 1.0,
            top_k=None,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            use_cache=True,
        )
        out: list[Completion] = []
        watch = _QuestionWatch(len(prompts), n, self.eos_ids, progress)
        with torch.no_grad():
            for b, start in enumerate(range(0, len(flat), self.batch_size)):
                chunk = flat[start: start + self.batch_size]
                width = max(len(p) for p in chunk)
                ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for i, p in enumerate(chunk):  # left padding
                    ids[i, width - len(p):] = torch.tensor(p)
                    mask[i, width - len(p):] = 1
                # HF samples from the global RNG: seed it per batch so a batch's draws depend only on
                # (seed, batch index), not on what ran before
                torch.manual_seed(sampling.seed * 1_000_003 + b)
                gen = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                          generation_config=cfg, stopping_criteria=watch.batch(start, len(chunk)))
                for row in gen[:, width:].tolist():
                    cut = next((j for j, t in enumerate(row) if t in self.eos_ids), None)
                    toks = row if cut is None else row[:cut]
                    out.append(Completion(self.tokenizer.decode(toks, skip_special_tokens=True), cut is None))
                watch.finish_batch()  # the samples cut at the token limit end here
        return [out[i * n: (i + 1) * n] for i in range(len(prompts))]


class _QuestionWatch:
    """Per-question progress inside ``model.generate``: a stopping criterion that never stops, looks at
    each new token and calls ``progress(k)`` as soon as the last of a question's ``n`` samples has ended
    (``progress(0)`` on the other steps: a heartbeat for a display that prints on time).

    A batch of 256 sequences takes minutes on a CPU; counting only finished batches left the bar at 0
    for all of it."""

    def __init__(self, questions: int, n: int, eos_ids: Sequence[int], progress: Callable[[int], None] | None):
        self.n, self.eos_ids, self.progress = n, list(eos_ids), progress
        self.left = [n] * questions  # samples of each question not yet ended
        self.start, self.ended = 0, []

    def batch(self, start: int, rows: int):
        """The stopping-criteria list for the batch of flat sequences ``start .. start + rows - 1``."""
        from transformers import StoppingCriteria, StoppingCriteriaList

        self.start, self.ended = start, [False] * rows
        watch = self

        class _Watch(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                import torch

                hit = torch.isin(input_ids[:, -1], torch.tensor(watch.eos_ids, device=input_ids.device)).tolist()
                watch._end([i for i, h in enumerate(hit) if h])
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

        return StoppingCriteriaList([_Watch()]) if self.progress else None

    def _end(self, rows: list[int]) -> None:
        done = 0
        for i in rows:
            if not self.ended[i]:
                self.ended[i] = True
                q = (self.start + i) // self.n
                self.left[q] -= 1
                done += self.left[q] == 0
        if self.progress:
            self.progress(done)

    def finish_batch(self) -> None:
        self._end(range(len(self.ended)))


class VLLMBackend:
    name = "vllm"
    options = ("tensor_parallel_size", "max_model_len", "seed")

    def __init__(self, model_dir: str, tensor_parallel_size: int = 1, max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.9, seed: int = 0):
        try:
            from vllm import LLM
        except ImportError as e:  # only this backend needs vllm
            raise ImportError("the vllm backend needs vllm (pip install vllm on a GPU machine); "
                              "use --backend hf on a CPU") from e
        self.model_dir = str(model_dir)
        self.llm = LLM(model=self.model_dir, tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
                       gpu_memory_utilization=gpu_memory_utilization, seed=seed)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompts, n, sampling, progress=None):
        from vllm import SamplingParams

        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        texts = [self.tokenizer.apply_chat_template(list(m), tokenize=False, add_generation_prompt=True)
                 if has_template else "\n".join(x["content"] for x in m) for m in prompts]
        params = [SamplingParams(n=n, temperature=sampling.temperature, top_p=sampling.top_p,
                                 max_tokens=sampling.max_new_tokens, seed=sampling.seed * 1_000_003 + i)
                  for i in range(len(texts))]
        results = self.llm.generate(texts, params, use_tqdm=progress is not None)
        if progress:
            progress(len(texts))
        return [[Completion(o.text, o.finish_reason == "length") for o in r.outputs] for r in results]


#: backend name -> class (a plugin registers its own: a class with ``options``, the keywords it takes)
BACKENDS: Registry[type] = Registry("backend", error=ValueError)
BACKENDS.register("hf", HFBackend)
BACKENDS.register("vllm", VLLMBackend)


def make_backend(name: str, model_dir: str, **kw) -> Backend:
    """``hf``, ``vllm``, another registered backend, or ``auto`` (vllm where it is importable and a GPU is
    visible, else hf)."""
    if name == "auto":
        import importlib.util

        name = "hf"
        if importlib.util.find_spec("vllm") is not None:
            import torch

            if torch.cuda.is_available():
                name = "vllm"
    if name not in BACKENDS:
        raise ValueError(BACKENDS.unknown(name, [*BACKENDS.names(), "auto"]))
    cls = BACKENDS.get(name)
    return cls(model_dir, **{k: v for k, v in kw.items() if k in cls.options})
