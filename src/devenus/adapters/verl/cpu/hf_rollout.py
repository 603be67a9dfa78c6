"""``hf``: a token-in/token-out rollout backend for verl 0.9.1 built on HF ``model.generate``.

verl 0.9.1 only rolls out through server backends (vLLM, SGLang, TensorRT-LLM), none of which run on
this CPU. Its server contract has three parts, and this module fills each with a small class:

- :class:`HFRolloutServer`: the server, a Ray actor (one per replica). ``generate(prompt_ids,
  sampling_params, request_id, ...)`` returns verl's ``TokenOutput`` (response token ids and, when
  asked, per-token log-probs). Concurrent requests are gathered into micro-batches and decoded with
  ``model.generate`` (left padding, KV cache, temperature/top-p/top-k sampling or greedy).
  ``update_weights`` loads the actor's full state dict after each PPO update.
- :class:`HFRolloutReplica`: the driver-side replica (``RolloutReplicaRegistry.register("hf", ...)``);
  ``launch_servers`` starts the server actor next to the replica's workers.
- :class:`HFServerAdapter`: the worker-side adapter that verl's hybrid ``ActorRolloutRefWorker``
  builds (``verl.workers.rollout.base._ROLLOUT_REGISTRY[("hf", "async")]``). Its ``update_weights``
  drains the engine's ``(name, tensor)`` generator on every rank (FSDP's ``full_tensor`` is a
  collective) and ships the tensors to the server from rollout rank 0.

Log-probs are ``log_softmax(logits / T)`` of the raw model logits (T=1 for greedy), which is how
verl's actor computes ``old_log_probs``, not the top-p/top-k truncated distribution.

Decoding and sampling are :mod:`devenus.generate`'s (:func:`~devenus.generate.hf.decode`, the per-row
:class:`~devenus.generate.sampler.RowSampler`); this module keeps the serving loop. A request is sample
``occurrence`` of the key (the server's ``global_steps``, the request id, the sampling parameters, the
prompt's tokens), ``occurrence`` counting identical requests before it at this step, and draws from
``row_seed(rollout.seed, key, occurrence)``, never from the process's global RNG. With verl's
``rollout.full_determinism=True`` the request id is ``det-<sample index in the batch>`` (the CPU
backend's overrides set it), so the same config draws the same samples in every run, whatever requests
share its batch.
The logits themselves can move in the last float bits with the batch's shape (CPU GEMM blocking), so
a draw could change only where two tokens' perturbed scores tie to ~1e-6; so batches are made the same
way in every run too (by sample index, not by arrival time; see :meth:`HFRolloutServer._run_batches`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import ray
import torch
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from devenus.generate import row_seed
from devenus.generate.hf import decode
from devenus.generate.sampler import RowSampler

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

ROLLOUT_NAME = "hf"
SERVER_NAME_PREFIX = f"{ROLLOUT_NAME}_"
# One stdout line per weight sync; the e2e test (and a human) reads it.
WEIGHT_SYNC_LOG_TAG = "[devenus-hf-rollout] update_weights"
# DEVENUS_HF_ROLLOUT_STATS=1: one stdout line per decoded batch (rows, decoding steps, wall and CPU time)
BATCH_LOG_TAG = "[devenus-hf-rollout] batch"


def server_actor_name(replica_rank: int, node_rank: int = 0, kind: str = "", suffix: str = "") -> str:
    """Ray actor name of a replica's server (``hf_server_{replica}_{node}``, like vLLM's)."""
    kind = f"{kind}_" if kind else ""
    return f"{SERVER_NAME_PREFIX}server_{kind}{replica_rank}_{node_rank}{suffix}"


def weights_checksum(model: torch.nn.Module) -> float:
    """A cheap fingerprint of a model's parameters (sum of float64 sums of the parameters)."""
    total = 0.0
    with torch.no_grad():
        for p in model.parameters():
            total += float(p.detach().to(torch.float64).sum())
    return total


# ---------------------------------------------------------------------------------------- server
@dataclass
class _Request:
    prompt_ids: list[int]
    key: tuple
    future: asyncio.Future
    seed: int = 0
    request_id: str = ""
    arrived: float = field(default_factory=time.monotonic)


def _sampling_key(sampling_params: dict[str, Any], max_tokens: int) -> tuple:
    temperature = float(sampling_params.get("temperature", 1.0) or 0.0)
    top_p = float(sampling_params.get("top_p", 1.0) if sampling_params.get("top_p") is not None else 1.0)
    top_k = int(sampling_params.get("top_k", -1) if sampling_params.get("top_k") is not None else -1)
    rep = float(sampling_params.get("repetition_penalty", 1.0) or 1.0)
    logprobs = bool(sampling_params.get("logprobs", False))
    if temperature <= 0:
        top_p, top_k = 1.0, -1
    return (temperature, top_p, top_k, rep, int(max_tokens), logprobs)


class HFRolloutServer:
    """Token-in/token-out generation server (wrapped with ``ray.remote`` by the replica).

    Args:
        config: verl ``RolloutConfig`` (dataclass or DictConfig).
        model_config: ``actor_rollout_ref.model`` (DictConfig or ``HFModelConfig``).
        replica_rank, node_rank: identity, for logs.
        batch_window_s, max_batch_wait_s: how requests are gathered into batches (see
            :meth:`_run_batches`): a whole step's rollouts are decoded in one ``generate`` call.
    """

    def __init__(
        self,
        config: Any,
        model_config: Any,
        replica_rank: int = 0,
        node_rank: int = 0,
        batch_window_s: float = 0.2,
        max_batch_wait_s: float = 2.0,
    ) -> None:
        from .shims import pin_torch_threads

        pin_torch_threads()
        self.config = omega_conf_to_dataclass(config)
        if not isinstance(model_config, HFModelConfig):
            model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.model_config: HFModelConfig = model_config
        self.replica_rank = replica_rank
        self.node_rank = node_rank
        self.batch_window_s = batch_window_s
        self.max_batch_wait_s = max_batch_wait_s
        self.max_batch_size = max(1, int(getattr(self.config, "max_num_seqs", 256) or 256))

        self.model = self._load_model()
        self.eos_token_ids = self._eos_token_ids()
        pad = getattr(self.model_config.tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad) if pad is not None else self.eos_token_ids[0]
        self.max_model_len = int(
            getattr(self.config, "max_model_len", None) or (self.config.prompt_length + self.config.response_length)
        )

        self.seed = int(getattr(self.config, "seed", 0) or 0)
        self.log_batches = os.environ.get("DEVENUS_HF_ROLLOUT_STATS", "0") == "1"
        self._occurrences: dict[tuple, int] = {}  # identical requests seen at the current step
        self._occurrence_step: Any = None
        self.global_steps: Optional[int] = None
        self.weight_version = 0
        self.num_generated_tokens = 0
        self.num_generate_calls = 0
        self._pending: list[_Request] = []
        self._batcher: Optional[asyncio.Task] = None
        self._lock: Optional[asyncio.Lock] = None  # created lazily on the actor's event loop

    # --- setup
    def _load_model(self) -> torch.nn.Module:
        from transformers import AutoModelForCausalLM

        override = dict(self.model_config.override_config or {})
        attn = override.get("attn_implementation", "eager")
        path = self.model_config.local_path or self.model_config.path
        model = AutoModelForCausalLM.from_pretrained(
            path,
            dtype=torch.float32,
            attn_implementation=attn,
            trust_remote_code=self.model_config.trust_remote_code,
        )
        model.eval()
        model.requires_grad_(False)
        return model

    def _eos_token_ids(self) -> list[int]:
        ids: list[int] = []
        gen = self.model_config.generation_config
        for src in (getattr(gen, "eos_token_id", None), getattr(self.model_config.tokenizer, "eos_token_id", None)):
            if src is None:
                continue
            for i in src if isinstance(src, (list, tuple)) else [src]:
                if int(i) not in ids:
                    ids.append(int(i))
        if not ids:
            ids = [int(self.model.config.eos_token_id)]
        return ids

    def _get_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # --- identity
    def get_server_address(self) -> str:
        return f"hf-replica-{self.replica_rank}-node-{self.node_rank}"

    def get_weight_info(self) -> dict[str, Any]:
        return {
            "weight_version": self.weight_version,
            "global_steps": self.global_steps,
            "checksum": weights_checksum(self.model),
            "num_generated_tokens": self.num_generated_tokens,
            "num_generate_calls": self.num_generate_calls,
        }

    # --- generation
    def _max_tokens(self, prompt_len: int, sampling_params: dict[str, Any]) -> int:
        max_possible = self.max_model_len - prompt_len
        if max_possible < 1:
            raise ValueError(
                f"Prompt length ({prompt_len}) leaves no room to generate within max_model_len {self.max_model_len}"
            )
        if "max_tokens" in sampling_params:
            max_tokens = int(sampling_params["max_tokens"])
        elif "max_new_tokens" in sampling_params:
            max_tokens = int(sampling_params["max_new_tokens"])
        else:
            max_tokens = min(
                self.config.response_length, self.config.prompt_length + self.config.response_length - prompt_len
            )
        return max(1, min(max_tokens, max_possible))

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str = "",
        image_data: Optional[list[Any]] = None,
        video_data: Optional[list[Any]] = None,
        audio_data: Optional[list[Any]] = None,
        mm_processor_kwargs: Optional[dict[str, Any]] = None,
        priority: int = 0,
        **kwargs: Any,
    ) -> TokenOutput:
        if image_data or video_data or audio_data:
            raise NotImplementedError("the hf rollout is text-only")
        prompt_ids = [int(t) for t in prompt_ids]
        sampling_params = dict(sampling_params or {})
        key = _sampling_key(sampling_params, self._max_tokens(len(prompt_ids), sampling_params))
        loop = asyncio.get_running_loop()
        req = _Request(prompt_ids=prompt_ids, key=key, future=loop.create_future(),
                       seed=self._next_seed(request_id, prompt_ids, key), request_id=str(request_id))
        self._pending.append(req)
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._run_batches_safely())
        token_ids, log_probs = await req.future
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if key[-1] else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def _next_seed(self, request_id: str, prompt_ids: list[int], key: tuple) -> int:
        # Two requests identical in every part of the seed (e.g. vote rows that repeat a sample
        # index) must still draw different samples: count them, per step, in arrival order.
        if self._occurrence_step != self.global_steps:
            self._occurrences.clear()
            self._occurrence_step = self.global_steps
        prompt = hashlib.sha256(",".join(map(str, prompt_ids)).encode()).hexdigest()
        ident = f"{self.global_steps}|{request_id}|{key!r}|{prompt}"
        occurrence = self._occurrences.get(ident, 0)
        self._occurrences[ident] = occurrence + 1
        return row_seed(self.seed, ident, occurrence)

    @staticmethod
    def _index(r: _Request) -> Optional[int]:
        # verl's deterministic request ids are "det-<sample index in the generate call>"
        rid = r.request_id
        return int(rid[4:]) if rid.startswith("det-") and rid[4:].isdigit() else None

    def _slot(self, r: _Request) -> tuple:
        index = self._index(r)
        return (r.key, None if index is None else index // self.max_batch_size)

    async def _run_batches_safely(self) -> None:
        try:
            await self._run_batches()
        except BaseException as e:  # a waiter must never hang on a dead batcher
            logger.exception("hf rollout batcher failed")
            pending, self._pending = self._pending, []
            for r in pending:
                if not r.future.done():
                    r.future.set_exception(e if isinstance(e, Exception) else RuntimeError(repr(e)))
            raise

    async def _run_batches(self) -> None:
        """Decode pending requests in batches that are made the same way in every run.

        A request with verl's deterministic id ``det-<i>`` belongs to slot ``(sampling key,
        i // max_batch_size)``; a slot is decoded as soon as it is full, or once no request has arrived
        for ``batch_window_s`` (a call's last, partial slot), so which requests share a batch does not
        depend on timing (a batch's logits, hence a near-tie draw, could). Requests with other ids are
        batched as they come: all that arrived until a quiet ``batch_window_s``, at most
        ``max_batch_wait_s``. Rows are decoded in (sample index, seed) order.
        """
        while self._pending:
            start = time.monotonic()
            while True:
                slots: dict[tuple, list[_Request]] = {}
                for r in self._pending:
                    slots.setdefault(self._slot(r), []).append(r)
                ready = [k for k, v in slots.items() if k[1] is not None and len(v) >= self.max_batch_size]
                if ready:
                    break
                now = time.monotonic()
                if now - max(r.arrived for r in self._pending) >= self.batch_window_s:
                    ready = list(slots)  # quiet: every slot, partial ones included
                    break
                if now - start >= self.max_batch_wait_s and any(k[1] is None for k in slots):
                    ready = [k for k in slots if k[1] is None]  # the cap never cuts an indexed slot
                    break
                await asyncio.sleep(self.batch_window_s / 4)
            taken = set(ready)
            self._pending = [r for r in self._pending if self._slot(r) not in taken]
            for slot in sorted(ready, key=lambda k: (repr(k[0]), -1 if k[1] is None else k[1])):
                reqs = sorted(slots[slot], key=lambda r: (self._index(r) or 0, r.request_id, r.seed))
                for i in range(0, len(reqs), self.max_batch_size):
                    await self._run_chunk(slot[0], reqs[i : i + self.max_batch_size])

    async def _run_chunk(self, key: tuple, chunk: list[_Request]) -> None:
        try:
            async with self._get_lock():
                results = await asyncio.to_thread(
                    self._generate_batch, [r.prompt_ids for r in chunk], key, [r.seed for r in chunk]
                )
        except Exception as e:  # deliver the error to every waiter of this chunk
            logger.exception("hf rollout generate failed")
            for r in chunk:
                if not r.future.done():
                    r.future.set_exception(e)
            return
        for r, res in zip(chunk, results, strict=True):
            if not r.future.done():
                r.future.set_result(res)

    @torch.no_grad()
    def _generate_batch(
        self, prompts: list[list[int]], key: tuple, seeds: list[int]
    ) -> list[tuple[list[int], Optional[list[float]]]]:
        """Decode one micro-batch; returns (token_ids, log_probs) per prompt (log_probs None unless the
        sampling key asks for them). Sampled rows draw from ``seeds``."""

        temperature, top_p, top_k, rep, max_tokens, want_logprobs = key
        bsz = len(prompts)
        max_len = max(len(p) for p in prompts)
        input_ids = torch.full((bsz, max_len), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((bsz, max_len), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding
            input_ids[i, max_len - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention_mask[i, max_len - len(p) :] = 1

        do_sample = temperature > 0
        sampler = RowSampler(seeds, temperature, top_p, top_k) if do_sample else None
        t0, c0 = time.perf_counter(), time.thread_time()
        new_tokens, token_logp, steps = decode(self.model, input_ids, attention_mask, max_tokens, sampler,
                                               self.eos_token_ids, self.pad_token_id,
                                               temperature=temperature if do_sample else 1.0,
                                               want_logprobs=bool(want_logprobs), repetition_penalty=rep)
        if self.log_batches:
            print(f"{BATCH_LOG_TAG} rows={bsz} prompt_len={max_len} steps={steps} "
                  f"wall_s={time.perf_counter() - t0:.3f} cpu_s={time.thread_time() - c0:.3f}", flush=True)

        results = []
        for i in range(bsz):
            toks = new_tokens[i].tolist()
            # up to the first eos token, kept, as vLLM does
            n = next((j + 1 for j, t in enumerate(toks) if t in self.eos_token_ids), len(toks))
            results.append((toks[:n], token_logp[i, :n].tolist() if token_logp is not None else None))
            self.num_generated_tokens += n
        self.num_generate_calls += 1
        return results

    # --- weights
    async def update_weights(self, named_tensors: dict[str, torch.Tensor], global_steps: Optional[int] = None) -> dict:
        """Load the actor's (full, HF-named) tensors into the rollout model."""
        async with self._get_lock():
            info = await asyncio.to_thread(self._load_weights, named_tensors)
        if global_steps is not None:
            self.global_steps = global_steps
        info["global_steps"] = self.global_steps
        print(
            f"{WEIGHT_SYNC_LOG_TAG} replica={self.replica_rank} version={info['weight_version']} "
            f"global_steps={self.global_steps} tensors={info['num_tensors']} checksum={info['checksum']:.12e}",
            flush=True,
        )
        return info

    @torch.no_grad()
    def _load_weights(self, named_tensors: dict[str, torch.Tensor]) -> dict:
        own = {**dict(self.model.named_parameters(remove_duplicate=False)), **dict(self.model.named_buffers())}
        unexpected = [k for k in named_tensors if k not in own]
        if unexpected:
            raise KeyError(f"hf rollout: unexpected weight names from the actor: {unexpected[:8]}")
        tied = {"lm_head.weight"} if getattr(self.model.config, "tie_word_embeddings", False) else set()
        missing = [k for k in dict(self.model.named_parameters()) if k not in named_tensors and k not in tied]
        if missing:
            raise KeyError(f"hf rollout: the actor did not send {missing[:8]}")
        for name, tensor in named_tensors.items():
            own[name].copy_(tensor.to(dtype=own[name].dtype))
        self.weight_version += 1
        return {"weight_version": self.weight_version, "num_tensors": len(named_tensors),
                "checksum": weights_checksum(self.model)}

    # --- lifecycle hooks verl calls on every server (nothing to free on a CPU)
    async def wake_up(self, tags: Optional[list[str]] = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None  # the KV cache lives only inside one generate call

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def wait_for_requests_to_drain(self) -> None:
        while self._pending or (self._batcher is not None and not self._batcher.done()):
            await asyncio.sleep(0.01)

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        return {"aborted_count": 0, "request_ids": []}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict:
        return {"aborted": False, "request_id": request_id}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


# --------------------------------------------------------------------------------------- replica
class HFRolloutReplica(RolloutReplica):
    """Driver-side replica: one :class:`HFRolloutServer` actor per replica, next to its workers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server_class = ray.remote(HFRolloutServer)

    def rollout_worker_use_gpu(self) -> bool:
        return False

    def _kind(self) -> str:
        return "reward" if self.is_reward_model else "teacher" if self.is_teacher_model else ""

    async def launch_servers(self) -> None:
        options: dict[str, Any] = {
            "name": server_actor_name(self.replica_rank, 0, self._kind(), self.name_suffix),
            "max_concurrency": self.max_concurrency,
            "num_cpus": 0,
        }
        if self.workers:
            node_id = await self.workers[0].__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
            options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=node_id, soft=False
            )
        server = self.server_class.options(**options).remote(
            config=self.config,
            model_config=self.model_config,
            replica_rank=self.replica_rank,
            node_rank=0,
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = await server.get_server_address.remote()

    def _get_server_name_prefix(self) -> str:
        return SERVER_NAME_PREFIX


# ------------------------------------------------------------------------------- worker adapter
class HFServerAdapter(BaseRollout):
    """Worker-side rollout of the hybrid ``ActorRolloutRefWorker``: forwards control calls and
    weights to this replica's :class:`HFRolloutServer`."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **kwargs: Any):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        rollout_world_size = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // rollout_world_size if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % rollout_world_size
        self._has_server = self.rollout_rank == 0
        self.server_handle: Optional[ray.actor.ActorHandle] = None
        self.sleep_level = 2

    def _server(self) -> Optional[ray.actor.ActorHandle]:
        if not self._has_server:
            return None
        if self.server_handle is None:
            self.server_handle = ray.get_actor(server_actor_name(self.replica_rank, 0))
        return self.server_handle

    async def resume(self, tags: list[str]) -> None:
        server = self._server()
        if server is not None:
            await server.wake_up.remote(tags=tags)

    async def release(self) -> None:
        server = self._server()
        if server is not None:
            await server.sleep.remote()

    async def update_weights(
        self,
        weights: Any,
        global_steps: Optional[int] = None,
        wire_format: str = "named_tensors",
        peft_config: Any = None,
        **kwargs: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise NotImplementedError(f"hf rollout supports wire_format='named_tensors' only, got {wire_format!r}")
        if peft_config is not None:
            raise NotImplementedError("hf rollout: LoRA adapter sync is not supported; use lora.merge=True")
        collected: dict[str, torch.Tensor] = {}
        keep = self._has_server
        # Every rank must drain the generator: DTensor.full_tensor() is a collective.
        if hasattr(weights, "__aiter__"):
            async for name, tensor in weights:
                if keep:
                    collected[name] = tensor.detach().to("cpu").clone()
        else:
            for name, tensor in weights:
                if keep:
                    collected[name] = tensor.detach().to("cpu").clone()
        server = self._server()
        if server is not None:
            await server.update_weights.remote(collected, global_steps=global_steps)

    def generate_sequences(self, prompts: Any) -> Any:
        raise NotImplementedError("the hf rollout is served through HFRolloutServer (async server mode)")


_DEVENUS_MODULE_READY = True
