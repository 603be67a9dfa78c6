"""``hf``: a Hugging Face causal LM on the CPU (or any torch device): batched, left padded, KV cache, the
tokenizer's chat template (the prompt verl's ``RLHFDataset`` builds), each row sampled by its own
:class:`~devenus.generate.sampler.RowSampler` generator.

:func:`decode` is the one decoding loop (also the CPU rollout server's): KV-cache decoding that drops
finished rows from the batch as it goes (``model.generate`` keeps computing them until the longest row
ends). A row's logits can move in the last float bits with the batch's shape (CPU GEMM blocking), so a
draw could change with its batch only where two perturbed scores tie to ~1e-6.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import torch

from devenus.generate import Sample, Sampling, row_seed
from devenus.generate.sampler import RowSampler

__all__ = ["HFBackend", "decode", "eos_ids_of", "prompt_text"]


def prompt_text(tokenizer, messages: Sequence[dict]) -> str:
    """The chat template's prompt; without a template, the messages' text one per line (as a plain LM sees it)."""
    if not getattr(tokenizer, "chat_template", None):
        return "\n".join(m["content"] for m in messages)
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


def eos_ids_of(tokenizer, model) -> list[int]:
    """The tokenizer's EOS and the model's generation-config EOS ids, in that order, without repeats."""
    ids: list[int] = []
    for src in (getattr(tokenizer, "eos_token_id", None),
                getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        for i in src if isinstance(src, (list, tuple)) else [src]:
            if i is not None and int(i) not in ids:
                ids.append(int(i))
    return ids


@torch.no_grad()
def decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_tokens: int,
           sampler: Optional[RowSampler], eos_ids: Sequence[int], pad_id: int, *, temperature: float = 1.0,
           want_logprobs: bool = False, repetition_penalty: float = 1.0,
           on_end: Callable[[list[int]], None] | None = None) -> tuple[torch.Tensor, Optional[torch.Tensor], int]:
    """Decode a left-padded batch: new tokens [B, T] (pad after EOS), their log-probs ``log_softmax(logits /
    temperature)`` of the raw logits (or None) and the number of decoding steps. ``sampler`` None: greedy.
    ``on_end(rows)``: the batch rows that just ended (EOS); rows cut at ``max_tokens`` are not reported."""
    if repetition_penalty != 1.0:
        return _generate(model, input_ids, attention_mask, max_tokens, sampler, eos_ids, pad_id, temperature,
                         want_logprobs, repetition_penalty)
    device = input_ids.device
    bsz = input_ids.shape[0]
    eos = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    new_tokens = torch.full((bsz, max_tokens), pad_id, dtype=torch.long)
    token_logp = torch.zeros((bsz, max_tokens), dtype=torch.float32) if want_logprobs else None
    rows = torch.arange(bsz)  # the original row of each row of the running batch
    live = torch.ones(bsz, dtype=torch.bool)  # rows of the running batch still decoding
    mask = attention_mask
    pos = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    cache, logits = out.past_key_values, out.logits[:, -1, :].float()
    next_pos = pos[:, -1:] + 1
    steps = 0
    for t in range(max_tokens):
        steps = t + 1
        # finished rows still in the batch (not yet dropped) compute on but draw and record nothing
        idx = live.nonzero().squeeze(1)
        scores = logits[idx.to(device)]
        if sampler is not None:
            tok = sampler.perturb(scores, rows[idx].tolist()).argmax(-1)
        else:
            tok = scores.argmax(-1)
        new_tokens[rows[idx], t] = tok.cpu()
        if token_logp is not None:
            scaled = scores / temperature if temperature != 1.0 else scores
            token_logp[rows[idx], t] = torch.log_softmax(scaled, -1).gather(-1, tok[:, None]).squeeze(-1).cpu()
        feed = torch.full((len(rows),), pad_id, dtype=torch.long, device=device)
        feed[idx.to(device)] = tok
        ended = torch.isin(tok, eos).cpu()
        live[idx] = ~ended
        if on_end is not None:
            on_end(rows[idx[ended]].tolist())
        n_live = int(live.sum())
        if n_live == 0 or t == max_tokens - 1:
            break
        if len(rows) - n_live >= max(1, len(rows) // 8):  # drop finished rows once they are 1/8 of the batch
            keep = live.nonzero().squeeze(1)
            cache.batch_select_indices(keep.to(device))
            rows, live = rows[keep], live[keep]
            mask, next_pos, feed = mask[keep.to(device)], next_pos[keep.to(device)], feed[keep.to(device)]
        mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=mask.dtype, device=device)], dim=1)
        out = model(input_ids=feed[:, None], attention_mask=mask, position_ids=next_pos,
                    past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1, :].float()
        next_pos = next_pos + 1
    return new_tokens[:, :steps], (token_logp[:, :steps] if token_logp is not None else None), steps


def _generate(model, input_ids, attention_mask, max_tokens, sampler, eos_ids, pad_id, temperature, want_logprobs,
              repetition_penalty):
    """``model.generate`` for what :func:`decode` does not do itself: a repetition penalty."""
    from transformers import GenerationConfig, LogitsProcessorList

    # sampling happens in the sampler (per-row generators): generate itself runs greedy
    gen_cfg = GenerationConfig(
        max_new_tokens=max_tokens, do_sample=False, temperature=1.0, top_p=1.0, top_k=None,
        repetition_penalty=repetition_penalty, eos_token_id=list(eos_ids), pad_token_id=pad_id,
        use_cache=True, return_dict_in_generate=True,
        output_logits=want_logprobs,  # otherwise the [B, T, V] logits would be kept and thrown away
    )
    processors = LogitsProcessorList([sampler] if sampler is not None else [])
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=gen_cfg,
                         logits_processor=processors)
    new_tokens = out.sequences[:, input_ids.shape[1]:].cpu()
    token_logp = None
    if want_logprobs:  # raw logits, [B, T, V] -> log-probs at the sampling temperature
        logits = torch.stack(out.logits, dim=1).float().cpu()
        if temperature != 1.0:
            logits = logits / temperature
        token_logp = torch.log_softmax(logits, dim=-1).gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
    return new_tokens, token_logp, new_tokens.shape[1]


class HFBackend:
    """``HFBackend(model_dir, batch_size=64, device="cpu", dtype="float32")`` loads the model folder;
    ``HFBackend(model=(model, tokenizer))`` (or a loader of that pair, called on first use) uses a loaded one."""

    name = "hf"
    #: the make_backend keywords it takes
    options = ("model", "batch_size", "device", "dtype")

    def __init__(self, model_dir: Any = None, *, model: Any = None, batch_size: int = 64, device: str = "cpu",
                 dtype: str = "float32"):
        if model_dir is None and model is None:
            raise ValueError("the hf backend needs a model folder or a (model, tokenizer) pair")
        self.model_dir = None if model_dir is None else str(model_dir)
        self.batch_size, self.device, self.dtype = batch_size, device, dtype
        self._pair = model

    def _load(self):
        if self._pair is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.model_dir)
            # a merged verl checkpoint is stored in bf16; computing in fp32 keeps the CPU path exact and fast
            m = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=getattr(torch, self.dtype)).to(self.device)
            self._pair = (m, tok)
        elif callable(self._pair):
            self._pair = self._pair()
        return self._pair

    @property
    def model(self):
        return self._load()[0]

    @property
    def tokenizer(self):
        return self._load()[1]

    def prompt_ids(self, messages: Sequence[dict]) -> list[int]:
        """The prompt's token ids, as the score stage and verl's dataset tokenize it."""
        return list(self.tokenizer(prompt_text(self.tokenizer, messages))["input_ids"])

    def generate(self, prompts, keys, n, sampling: Sampling, progress=None) -> list[list[Sample]]:
        if len(prompts) != len(keys):
            raise ValueError(f"{len(prompts)} prompts but {len(keys)} keys")
        model, tok = self._load()
        model.eval()
        device = next(model.parameters()).device
        eos_ids = eos_ids_of(tok, model)
        pad = tok.pad_token_id
        pad_id = int(pad) if pad is not None else eos_ids[0]
        ids_of = [self.prompt_ids(p) for p in prompts]
        jobs = [(i, j) for i in range(len(prompts)) for j in range(n)]
        left = [n] * len(prompts)  # samples of each prompt not yet ended

        out: list[list[Any]] = [[None] * n for _ in prompts]
        for start in range(0, len(jobs), self.batch_size):
            chunk = jobs[start:start + self.batch_size]
            width = max(len(ids_of[i]) for i, _ in chunk)
            ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, (i, _) in enumerate(chunk):  # left padding
                ids[r, width - len(ids_of[i]):] = torch.tensor(ids_of[i])
                mask[r, width - len(ids_of[i]):] = 1
            sampler = None
            if sampling.temperature > 0:
                sampler = RowSampler([row_seed(sampling.seed, str(keys[i]), j) for i, j in chunk],
                                     sampling.temperature, sampling.top_p, sampling.top_k)
            ended = [False] * len(chunk)

            def on_end(rows, chunk=chunk, ended=ended):
                done = 0
                for r in rows:
                    if not ended[r]:
                        ended[r] = True
                        left[chunk[r][0]] -= 1
                        done += left[chunk[r][0]] == 0
                if progress:
                    progress(done)

            new, _, _ = decode(model, ids.to(device), mask.to(device), sampling.max_new_tokens, sampler, eos_ids,
                               pad_id, on_end=on_end)
            on_end(range(len(chunk)))  # the rows cut at the token limit end here
            for (i, j), row in zip(chunk, new.tolist()):
                cut = next((c for c, t in enumerate(row) if t in eos_ids), None)
                toks = row if cut is None else row[:cut + 1]
                out[i][j] = Sample(toks, tok.decode(toks, skip_special_tokens=True), truncated=cut is None)
        return out
