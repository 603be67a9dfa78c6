"""Extra per-token statistics from the actor's existing log-prob forward pass (no second forward).

verl 0.9.1's FSDP engine turns the model's logits into ``log_probs``, ``entropy`` and
``sum_pi_squared`` in ``FSDPEngineWithLMHead.prepare_model_outputs``; every key it returns travels,
generically, through micro-batch concatenation, the worker's post-processing and the dp collect back
to ``RayPPOTrainer._compute_old_log_prob``. :class:`TokenStatsFSDPEngine` subclasses that engine and
adds ``self_certainty`` (``SC_t = logsumexp(z_t) - mean_j z_t,j - log V``, chunked over tokens, from
the same logits, at the same temperature as the log-probs) when the micro-batch carries the non-tensor
flag ``calculate_self_certainty``, and ``hidden_pooled`` when it carries ``calculate_hidden_pooled``:
per row and layer, the mean of the hidden states over the row's response tokens, in Hugging Face's
``hidden_states`` order (embeddings, every decoder layer but the last, the final norm's output).
Forward hooks on those modules pool each layer's output as the forward produces it
(:class:`ResponsePool`: one ``[response tokens, d]`` gather per layer, never ``[L, T, d]``); the result
``[rows, L+1, d]`` travels as a per-row nested tensor through the same generic path. Without the flags
it does nothing beyond the parent.

:func:`install` swaps it into verl's ``EngineRegistry`` in place of ``FSDPEngineWithLMHead`` for every
(backend, device) key that maps to exactly that class (fsdp/fsdp2 x cuda/npu; a vendor-specific engine
registered by someone else is left alone). It runs in every process that imports verl through the
plugin :mod:`devenus.adapters.verl.plugin`. On the driver side, :func:`collect_extra_stats` wraps the
actor worker group's ``compute_log_prob`` for the duration of one ``_compute_old_log_prob`` call: it
adds the flag and keeps the extra outputs, re-padded to ``[rows, response_len]``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

import torch

from devenus.signals import DEFAULT_CHUNK_SIZE, self_certainty_from_logits

SELF_CERTAINTY = "self_certainty"
FLAG = "calculate_self_certainty"  # non-tensor flag on the log-prob batch
CHUNK_KEY = "self_certainty_chunk_size"  # optional non-tensor: tokens per chunk
HIDDEN_POOLED = "hidden_pooled"
HIDDEN_FLAG = "calculate_hidden_pooled"  # non-tensor flag on the log-prob batch
#: statistics this extension can add, by the name a method lists in ``needs``
EXTRA_STATS = (SELF_CERTAINTY, HIDDEN_POOLED)
#: per-row statistics ([rows, ...], not per token): they skip the response slicing of per-token ones
PER_ROW_STATS = (HIDDEN_POOLED,)

_INSTALLED = False
TokenStatsFSDPEngine: type | None = None  # the engine class, built by install() (importing verl's engine lazily)


def requested_stats(step_needs: Iterable[str]) -> tuple[str, ...]:
    """The extra statistics a method's ``step_needs`` ask for (empty: the log-prob pass is verl's own)."""
    step_needs = set(step_needs)
    return tuple(s for s in EXTRA_STATS if s in step_needs)


class ResponsePool:
    """Per sequence and layer, the mean over response tokens of a layer's output, taken in a forward hook.

    The layout is verl's: ``packed`` (remove-padding) feeds the model ``[1, total_tokens (+ pad), d]``,
    sequences back to back; otherwise ``[rows, max_len, d]``, each sequence left-aligned. In both, row b's
    response is the last ``response_len[b]`` of its ``seq_len[b]`` tokens (verl's no-padding format is
    prompt then response, no padding between); ``response_mask[b, :response_len[b]]`` weighs them (0 for
    tokens the model did not generate, e.g. tool output in multi-turn rollouts).
    """

    def __init__(self, seq_lens: torch.Tensor, response_lens: torch.Tensor, response_mask: torch.Tensor, packed: bool,
                 max_len: int | None = None):
        seq_lens, response_lens = seq_lens.long().cpu(), response_lens.long().cpu()
        rows = torch.repeat_interleave(torch.arange(len(seq_lens)), response_lens)
        t = torch.arange(len(rows)) - torch.repeat_interleave(response_lens.cumsum(0) - response_lens, response_lens)
        start = seq_lens - response_lens  # first response position within each sequence
        if packed:
            offsets = seq_lens.cumsum(0) - seq_lens
            self.flat = offsets[rows] + start[rows] + t
        else:
            width = int(max_len if max_len is not None else seq_lens.max())
            self.flat = rows * width + start[rows] + t
        self.rows = rows
        self.weight = response_mask.cpu().to(torch.float32)[rows, t]
        self.count = torch.zeros(len(seq_lens)).index_add_(0, rows, self.weight).clamp(min=1.0)[:, None]
        self.sums: list[torch.Tensor] = []
        self.handles: list = []

    def add(self, hidden: torch.Tensor) -> None:
        h = hidden[0] if isinstance(hidden, (tuple, list)) else hidden
        h = h.reshape(-1, h.shape[-1])
        dev = h.device
        picked = h[self.flat.to(dev)].float() * self.weight.to(dev)[:, None]  # [response tokens, d], this layer only
        self.sums.append(torch.zeros(len(self.count), h.shape[-1], device=dev).index_add_(0, self.rows.to(dev), picked))

    def hook(self, modules) -> "ResponsePool":
        """Register one forward hook per module, in order (their outputs are the pooled layers)."""
        for m in modules:
            self.handles.append(m.register_forward_hook(lambda _m, _inp, out: self.add(out)))
        return self

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def means(self) -> torch.Tensor:
        """[rows, layers, d] float32."""
        return torch.stack([s / self.count.to(s.device) for s in self.sums], dim=1)


def hidden_state_modules(model) -> list:
    """The modules whose outputs are Hugging Face's ``hidden_states`` of a decoder-only LM: the embedding,
    every decoder layer but the last, and the final norm (whose output replaces the last layer's). Found
    by structure (a submodule with ``embed_tokens``, ``layers`` and ``norm``), so FSDP wrappers around
    the model or its layers do not matter."""
    for m in model.modules():
        if all(hasattr(m, a) for a in ("embed_tokens", "layers", "norm")) and len(m.layers) > 0:
            return [m.embed_tokens, *list(m.layers)[:-1], m.norm]
    raise NotImplementedError(f"{type(model).__name__}: no decoder with embed_tokens/layers/norm to pool hidden states from")


def _engine_class():
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    class TokenStatsFSDPEngine(FSDPEngineWithLMHead):
        """verl's FSDP LM engine, plus ``self_certainty`` / ``hidden_pooled`` when the batch asks for them."""

        _hidden_pool = None  # this micro-batch's ResponsePool, between forward_step and prepare_model_outputs

        def forward_step(self, micro_batch, loss_function, forward_only):
            if not tu.get_non_tensor_data(data=micro_batch, key=HIDDEN_FLAG, default=False):
                return super().forward_step(micro_batch, loss_function, forward_only)
            if self.use_ulysses_sp:
                # each rank would see a slice of the packed sequence; the partial sums would need an
                # all-reduce over the SP group at the slice's global positions (not built yet)
                raise NotImplementedError("hidden_pooled with Ulysses sequence parallelism (set "
                                          "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1)")
            self._hidden_pool = _response_pool(micro_batch).hook(hidden_state_modules(self.module))
            try:
                return super().forward_step(micro_batch, loss_function, forward_only)
            finally:
                self._hidden_pool.remove()
                self._hidden_pool = None

        def prepare_model_outputs(self, output, output_args, micro_batch, logits_processor_func):
            model_output = super().prepare_model_outputs(output, output_args, micro_batch, logits_processor_func)
            if tu.get_non_tensor_data(data=micro_batch, key=FLAG, default=False):
                chunk = int(tu.get_non_tensor_data(data=micro_batch, key=CHUNK_KEY, default=DEFAULT_CHUNK_SIZE))
                model_output[SELF_CERTAINTY] = _self_certainty(self, output, output_args, micro_batch, chunk)
            if self._hidden_pool is not None:
                model_output[HIDDEN_POOLED] = self._hidden_pool.means()  # [rows, L+1, d], one entry per row
            return model_output

    TokenStatsFSDPEngine.__module__ = __name__
    TokenStatsFSDPEngine.__qualname__ = "TokenStatsFSDPEngine"
    return TokenStatsFSDPEngine


def _response_pool(micro_batch) -> ResponsePool:
    """The pool of a micro-batch's response tokens, in the layout (packed or padded) of its forward."""
    from verl.utils import tensordict_utils as tu

    packed = tu.get_non_tensor_data(data=micro_batch, key="use_remove_padding", default=True)
    seq_lens = micro_batch["input_ids"].offsets().diff()
    prompts, am = micro_batch["prompts"], micro_batch["attention_mask"]
    # response lengths as verl's no_padding_2_padding reads them
    response_lens = (micro_batch["responses"].offsets().diff() if prompts.is_nested
                     else am[:, prompts.shape[1]:].sum(dim=1))
    mask = micro_batch["response_mask"]
    if mask.is_nested:
        mask = torch.nested.to_padded_tensor(mask, 0.0)
    return ResponsePool(seq_lens, response_lens, mask, bool(packed))


def _self_certainty(engine, output, output_args, micro_batch, chunk: int) -> torch.Tensor:
    """Per-token self-certainty of ``engine``'s forward ``output``, as a nested tensor over the batch's rows."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.fsdp.transformer_impl import DTensor

    use_rmpad = tu.get_non_tensor_data(data=micro_batch, key="use_remove_padding", default=True)
    if tu.get_non_tensor_data(data=micro_batch, key="use_fused_kernels", default=False):
        raise NotImplementedError(
            "self-certainty needs the full logits; fused kernels never materialise them "
            "(set actor_rollout_ref.model.use_fused_kernels=False)")
    is_one = output_args.get("temperature_is_one", False)
    cu_seqlens = micro_batch["input_ids"].offsets()
    logits = output.logits
    if isinstance(logits, DTensor):  # vocab-sharded under TP: the same gather verl does
        logits = logits.full_tensor()
    if use_rmpad:
        temp = None if is_one else output_args["temperature_rmpad"]
        sc = self_certainty_from_logits(logits.squeeze(0), chunk, temp)  # ((nnz / sp) + pad,)
        sc = engine._gather_and_unpad_packed(sc, output_args["pad_size"])
    else:  # padded [bsz, seqlen, V], sequences left-aligned: only each row's valid prefix
        temp = output_args["temperature"]
        lengths = cu_seqlens.diff().tolist()
        sc = torch.cat([
            self_certainty_from_logits(logits[b, :n], chunk, None if is_one else temp[b])
            for b, n in enumerate(lengths)
        ])
    return torch.nested.nested_tensor_from_jagged(sc, cu_seqlens)


def install() -> type:
    """Register :class:`TokenStatsFSDPEngine` where verl's registry holds ``FSDPEngineWithLMHead``.

    Idempotent; returns the engine class. ``EngineRegistry.register`` refuses to overwrite a key, so
    the entries of its class-level table are replaced directly (only those naming exactly the parent).
    """
    global _INSTALLED, TokenStatsFSDPEngine
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    if not _INSTALLED:
        TokenStatsFSDPEngine = _engine_class()
        _INSTALLED = True
    for backends in EngineRegistry._engines.get("language_model", {}).values():
        for key, cls in list(backends.items()):
            if cls is FSDPEngineWithLMHead:
                backends[key] = TokenStatsFSDPEngine
    return TokenStatsFSDPEngine


def check_installed(stats: tuple[str, ...]) -> None:
    """Fail before any worker starts when a method needs extra statistics and the plugin is not loaded.

    Ray workers load the same plugins as this process (same environment and installed entry points),
    so the driver-side state is the proxy for theirs.
    """
    if stats and not _INSTALLED:
        raise RuntimeError(
            f"this method needs {list(stats)} from the actor's log-prob pass, but the DE-Venus engine "
            f"extension is not loaded: set VERL_USE_EXTERNAL_MODULES=devenus.adapters.verl.plugin (Ray workers "
            f"inherit it) or install DE-Venus with its verl.plugins entry point for that module")


@contextmanager
def collect_extra_stats(worker_group, method) -> Iterator[dict]:
    """Within the block, ``worker_group.compute_log_prob`` also returns the extra statistics the method's
    ``step_needs`` name; they land in the yielded dict as ``[rows, response_len]`` float tensors (row order
    of the log-prob batch), ``hidden_pooled`` as ``[rows, layers, d]``. Tokens per chunk: the method's ``logits_chunk_size()``.

    A method that needs none leaves the worker group untouched (other methods pay nothing).
    """
    stats = requested_stats(method.step_needs)
    chunk_size = int(method.logits_chunk_size())
    found: dict[str, torch.Tensor] = {}
    if not stats:
        yield found
        return
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    own = "compute_log_prob" in vars(worker_group)  # verl binds worker methods on the instance
    original = worker_group.compute_log_prob

    def compute_log_prob(batch_td, *args, **kwargs):
        if SELF_CERTAINTY in stats:
            tu.assign_non_tensor(batch_td, **{FLAG: True, CHUNK_KEY: int(chunk_size)})
        if HIDDEN_POOLED in stats:
            tu.assign_non_tensor(batch_td, **{HIDDEN_FLAG: True})
        output = original(batch_td, *args, **kwargs)
        for name in stats:
            value = tu.get(output, name)
            if value is None:
                raise RuntimeError(
                    f"the actor's log-prob pass returned no {name!r}: the DE-Venus engine extension is not "
                    f"loaded in the actor workers. Load `devenus.adapters.verl.plugin` in every Ray process "
                    f"(VERL_USE_EXTERNAL_MODULES=devenus.adapters.verl.plugin, or its verl.plugins entry point).")
            if name in PER_ROW_STATS:  # nested [rows, (layers), d] with a fixed middle size: stack the rows
                found[name] = torch.stack(list(value.unbind()) if value.is_nested else list(value)).float()
            else:
                found[name] = no_padding_2_padding(value, batch_td).float()
        return output

    worker_group.compute_log_prob = compute_log_prob
    try:
        yield found
    finally:
        if own:
            worker_group.compute_log_prob = original
        else:
            del worker_group.compute_log_prob
