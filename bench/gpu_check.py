"""The prepared GPU check: DE-Venus's own GPU work at Qwen3-4B's shapes, each measurement beside its bound.

    PYTHONPATH=src python3 bench/gpu_check.py --strict --out $OUT/gpu_check.json  # one NVIDIA GPU
    python bench/gpu_check.py --toy --strict                                        # tiny shapes on the CPU (the test)

For the accelerator machine that is sometimes lent (one H200; torch and transformers, no verl, Ray,
vLLM or network). ``devenus`` is imported from ``src/`` beside this file (no install needed); the
``imports`` section fails if that pulls in verl, Ray or vLLM. Models are random-initialised Qwen3s built
from a ``Qwen3Config`` on the device: nothing is downloaded.

``--strict`` (the default where CUDA is available; ``--no-strict`` turns it off) exits 1 when any
section failed or was skipped, or any measurement exceeds its bound. Every bounded measurement is
written as ``{"value", "bound", "pass"}`` (pass: value <= bound); ``--bound-override NAME=VALUE``
replaces a bound (the test breaks one on purpose). Sections, each timed and guarded (a failure is
recorded with its one-line error and the next section runs), skipped once ``--budget-s`` is spent:

- ``kernels``: at T = 8k and V = 151,936 (``--toy``: T = 96, the same V), in fp32 and bf16, at temperature 1
  and 0.7, the online kernel (:func:`devenus.signals.token_stats_from_logits` at the verl adapter's defaults) on random logits and
  the scorer's kernel (:func:`devenus.signals.head.token_stats_from_hidden`) on random final states and
  the model's head: extra device memory (bound ``online_kernel_mb``, ``scorer_mb``), time, and the
  largest difference from the naive formula (the full ``[T, V]`` log-softmax at the same temperature)
  on the same logits (``online_max_diff``, ``scorer_max_diff_fp32`` / ``_bf16``); every value finite.
- ``packed``: the remove-padding layout as verl feeds it: rows packed into one ``[1, nnz]`` sequence
  with restarting position ids, one temperature per row as a per-token tensor (verl's
  ``temperature_rmpad``), through a small fp32 model with V = 151,936; the online kernel on the packed
  logits (fp32 and bf16) against the naive formula at the same temperatures (``packed_max_diff``,
  ``online_kernel_mb``), and the packed rows' statistics against each row's own forward
  (``packed_vs_rows_max_diff``: the packing must not leak attention across rows).
- ``score``: the selection score stage (:func:`devenus.select.score.forward_signals`, every model signal,
  pivot_trace included) at T = 4,096 tokens per response with B = 8 and B = 32 in one batch; an
  out-of-memory error is a result (``oom`` 1 against a bound of 0), not a crash; every score finite.
- ``coe``: CoE on a small model whose residual stream carries three channels of ~1e3 (added to the
  first decoder layer's output by a forward hook, varying per token, as massive activations do), run
  once in fp32 and once in bf16: the bf16 CoE against the same bf16 states pooled in float64
  (``coe_pool_error_rel``: what the pooling itself loses) and against the fp32 run
  (``coe_bf16_vs_fp32_rel``), each as the largest difference over responses divided by the fp32 CoE's
  spread (standard deviation) over the responses, the scale on which responses are ranked.
- ``generate`` / ``generate_plain``: HF generation with the generation package's per-row sampler
  (:class:`devenus.generate.sampler.RowSampler`) and with transformers' own sampling: new tokens/s.
- ``geomin_pool``: GeoMin's hidden-state pooling (:class:`devenus.adapters.verl.token_stats.ResponsePool`
  on every ``hidden_states`` module) in one forward: time, peak memory, finite means.

Memory is the peak of CUDA's allocator over what was allocated before the call; on the CPU (``--toy``)
it is the peak of the tensor storages the call created and still holds, counted by a dispatch mode
(torch keeps no CPU allocator statistics), whose bookkeeping also inflates CPU times.

Writes the JSON after every section (atomically; ``--out``, default ``$OUT/gpu_check.json`` when ``$OUT``
is set, else ``<tmp>/devenus_gpu_check[_toy].json``, printed) and prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

QWEN3_4B = dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                num_key_value_heads=8, head_dim=128, vocab_size=151_936, tie_word_embeddings=True,
                max_position_embeddings=40_960, rope_theta=1_000_000.0, rms_norm_eps=1e-6)
TOY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
           num_key_value_heads=2, head_dim=16, vocab_size=1000, tie_word_embeddings=True,
           max_position_embeddings=1024, rope_theta=10_000.0, rms_norm_eps=1e-6)
# the packed section's model: Qwen3-4B's vocabulary (the kernel's width), two small layers, fp32
PACKED = dict(QWEN3_4B, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2)
# the CoE section's model (its shape was run on the CPU: BOUNDS' coe comments)
COE = dict(TOY, hidden_size=512, intermediate_size=1024, num_hidden_layers=8, vocab_size=2000, max_position_embeddings=4096)
# per-section sizes: (GPU, toy)
SIZES = {
    "kernels": (dict(tokens=8192, vocab=151_936), dict(tokens=96, vocab=151_936)),  # toy: 2 chunks of the real width
    "packed": (dict(lengths=[3000, 1500, 2692, 1000], temperatures=[0.6, 1.0, 1.3, 0.7]),
               dict(lengths=[5, 9, 3, 7], temperatures=[0.6, 1.0, 1.3, 0.7])),
    "score": (dict(prompt=512, response=3584, batches=[8, 32]), dict(prompt=8, response=24, batches=[2, 4])),
    "coe": (dict(n=8, prompt=64, response=512), dict(n=6, prompt=8, response=24)),
    "generate": (dict(batch=64, prompt=256, new=256), dict(batch=4, prompt=8, new=8)),
    "pool": (dict(rows=16, prompt=256, response=1024), dict(rows=3, prompt=8, response=16)),
}
BOUNDS = {  # every check is value <= bound
    "online_kernel_mb": 256.0,  # extra memory of the online kernel, T = 8k, V = 151,936 (issue 22)
    "scorer_mb": 256.0,  # extra memory of the scorer's kernel beside the final states and the head
    # |kernel - full log-softmax|, same logits, both in fp32 arithmetic: on the CPU at V = 151,936 the kernel's
    # entropy (logsumexp - sum p z) is within 5e-4 of float64 at T = 96 and 1,024, the naive one within 1e-4
    "online_max_diff": 2e-3,
    "packed_max_diff": 2e-3,  # the same on packed logits at per-row temperatures
    "scorer_max_diff_fp32": 2e-3,
    "scorer_max_diff_bf16": 5e-2,  # bf16 logits from another matmul tiling: about one bf16 step of a logit
    "packed_vs_rows_max_diff": 1e-3,  # fp32 model; a leak across rows moves logits by ~0.6 at toy shapes
    "nonfinite": 0,  # NaN or inf values among a section's results
    "oom": 0,  # the score stage ran out of device memory
    # measured on the CPU at COE's shape / the toy's: pooling in fp32 gives 3e-9 / 3e-11 and 0.24 / 0.47,
    # pooling in bf16 (the model's dtype) 4.7 / 3.5 and 4.9 / 3.3
    "coe_pool_error_rel": 0.05,
    "coe_bf16_vs_fp32_rel": 1.0,
}
MASSIVE = {"channels": [3, 17, 40], "magnitudes": [900.0, 1200.0, 1500.0]}


class _CpuLiveBytes:
    """Peak bytes of tensor storages created inside the block and still alive, by a dispatch mode."""

    def __init__(self):
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        meter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                meter.live = [(w, p, n) for w, p, n in meter.live if not w.expired()]
                known = {p for _, p, _ in meter.live}
                known |= {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
                          if isinstance(t, torch.Tensor) and t.layout == torch.strided}
                for t in tree_leaves(out):  # new storages only: views and in-place results alias an input
                    if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                        s = t.untyped_storage()
                        if s.data_ptr() not in known and s.nbytes():
                            meter.live.append((StorageWeakRef(s), s.data_ptr(), s.nbytes()))
                            known.add(s.data_ptr())
                meter.peak = max(meter.peak, sum(n for _, _, n in meter.live))
                return out

        self.mode, self.live, self.peak = Mode(), [], 0


class Meter:
    """Extra device memory (MB) and time of one measured call."""

    def __init__(self, device):
        import torch

        self.torch, self.cuda = torch, device.type == "cuda"

    def __enter__(self):
        t = self.torch
        if self.cuda:
            t.cuda.synchronize()
            t.cuda.empty_cache()
            t.cuda.reset_peak_memory_stats()
            self.base = t.cuda.memory_allocated()
        else:
            self.cpu = _CpuLiveBytes()
            self.cpu.mode.__enter__()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        t = self.torch
        if self.cuda:
            t.cuda.synchronize()
            self.mb = (t.cuda.max_memory_allocated() - self.base) / 1e6
        else:
            self.cpu.mode.__exit__(*exc)
            self.mb = self.cpu.peak / 1e6
        self.seconds = time.perf_counter() - self.t0
        return False


class Checks:
    """Measurements beside their bounds: ``add(label, bound_name, value)`` -> ``{value, bound, pass}``."""

    def __init__(self, bounds: dict):
        self.bounds, self.rows = bounds, {}

    def add(self, label: str, name: str, value) -> None:
        bound = self.bounds[name]
        ok = value is not None and math.isfinite(float(value)) and float(value) <= bound
        self.rows[label] = {"value": value, "bound": bound, "bound_name": name, "pass": bool(ok)}

    def nonfinite(self, label: str, *tensors) -> None:
        import torch

        self.add(label, "nonfinite", int(sum(int((~torch.isfinite(torch.as_tensor(x).float())).sum()) for x in tensors)))


def check_imports() -> dict:
    import devenus
    import devenus.adapters.verl.token_stats  # noqa: F401  (ResponsePool; verl is imported only by install())
    import devenus.generate.hf  # noqa: F401
    import devenus.select.score  # noqa: F401
    import devenus.signals  # noqa: F401

    pulled = sorted(m for m in sys.modules if m.split(".")[0] in ("verl", "ray", "vllm") and sys.modules[m] is not None)
    if pulled:
        raise RuntimeError(f"importing devenus pulled in {pulled}")
    import torch
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
            "devenus": str(Path(devenus.__file__).parent)}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def naive_stats(z, temperature=None) -> dict:
    """The whole-width formula: the full ``[T, V]`` log-softmax in float32 at the temperature (scalar or per token)."""
    import torch

    z = z.float()
    if temperature is not None:
        t = torch.as_tensor(temperature, dtype=torch.float32, device=z.device)
        z = z / (t[:, None] if t.ndim else t)
    logp = torch.log_softmax(z, dim=-1)
    return {"entropy": -(logp.exp() * logp).sum(dim=-1),
            "self_certainty": -logp.mean(dim=-1) - math.log(z.shape[-1])}


def max_diff(a: dict, b: dict) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def kernels(model, device, bounds: dict, tokens: int, vocab: int) -> dict:
    import torch

    from devenus.signals import DEFAULT_BUDGET_BYTES, DEFAULT_CHUNK_SIZE, chunk_rows, token_stats_from_logits
    from devenus.signals.head import token_stats_from_hidden

    head = model.get_output_embeddings().weight.detach()  # [V, d] in the model's dtype (the toy's V is 1,000)
    d = head.shape[1]
    checks, cases = Checks(bounds), []
    g = torch.Generator(device=device).manual_seed(0)
    warm = torch.randn(8, d, generator=g, device=device, dtype=head.dtype)  # kernel launches and caches, untimed
    token_stats_from_logits(warm @ head.T, temperature=0.7), naive_stats(warm @ head.T, 0.7), token_stats_from_hidden(warm, head)
    del warm
    for dtype in (torch.float32, torch.bfloat16):
        name = "fp32" if dtype == torch.float32 else "bf16"
        logits = (torch.randn(tokens, vocab, generator=g, device=device) * 3.0).to(dtype)  # realistic spread of logits
        w = head.to(dtype)  # the head in this dtype (a copy for fp32), made before the measurement
        hidden = torch.randn(tokens, d, generator=g, device=device, dtype=dtype)
        for temp in (1.0, 0.7):
            tag = f"{name} T={tokens} temp={temp}"
            with Meter(device) as m:
                ours = token_stats_from_logits(logits, temperature=temp)
            row = {"dtype": name, "T": tokens, "temperature": temp, "online_s": m.seconds, "online_mb": m.mb}
            with Meter(device) as m:
                ref = naive_stats(logits, temp)
            row.update(naive_s=m.seconds, naive_mb=m.mb)
            checks.add(f"online_mb {tag}", "online_kernel_mb", row["online_mb"])
            checks.add(f"online_max_diff {tag}", "online_max_diff", max_diff(ours, ref))
            checks.nonfinite(f"online_nonfinite {tag}", *ours.values())
            del ours, ref
            with Meter(device) as m:
                sc = token_stats_from_hidden(hidden, w, temperature=temp)
            row.update(scorer_s=m.seconds, scorer_mb=m.mb)
            ref = naive_stats(hidden @ w.T, temp)  # the same logits, whole, in this dtype
            checks.add(f"scorer_mb {tag}", "scorer_mb", row["scorer_mb"])
            checks.add(f"scorer_max_diff {tag}", f"scorer_max_diff_{name}", max_diff(sc, ref))
            checks.nonfinite(f"scorer_nonfinite {tag}", *sc.values())
            del sc, ref
            cases.append(row)
        del logits, w, hidden
    return {"vocab": vocab, "head_vocab": head.shape[0], "online_chunk_tokens": chunk_rows(vocab, DEFAULT_CHUNK_SIZE, DEFAULT_BUDGET_BYTES),
            "budget_mb": DEFAULT_BUDGET_BYTES / 1e6, "cases": cases, "checks": checks.rows}


def packed(device, bounds: dict, shapes: dict, lengths: list[int], temperatures: list[float]) -> dict:
    """verl's remove-padding layout through the online kernel (``TokenStatsFSDPEngine._self_certainty``'s call)."""
    import torch

    from devenus.signals import token_stats_from_logits

    model = build_model(shapes, device, torch.float32)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(5)
    rows = [torch.randint(10, vocab, (n,), generator=g) for n in lengths]
    ids = torch.cat(rows)[None].to(device)
    pos = torch.cat([torch.arange(n) for n in lengths])[None].to(device)  # restarting: one sequence per row
    temp = torch.cat([torch.full((n,), t) for n, t in zip(lengths, temperatures)]).to(device)  # temperature_rmpad
    checks = Checks(bounds)
    with torch.no_grad():
        logits = model(input_ids=ids, position_ids=pos, use_cache=False).logits.squeeze(0)  # [nnz, V] fp32
        by_row = []
        for r, t in zip(rows, temperatures):  # each row alone, the padded path's per-row call
            z = model(input_ids=r[None].to(device), use_cache=False).logits[0]
            by_row.append(token_stats_from_logits(z, temperature=t))
            del z
    res = {"sequences": len(lengths), "nnz": int(ids.shape[1]), "vocab": vocab, "temperatures": temperatures}
    for name, z in (("fp32", logits), ("bf16", logits.bfloat16())):
        with Meter(device) as m:
            ours = token_stats_from_logits(z, temperature=temp)
        res[f"online_mb_{name}"], res[f"online_s_{name}"] = m.mb, m.seconds
        checks.add(f"online_mb packed {name}", "online_kernel_mb", m.mb)
        checks.add(f"packed_max_diff {name}", "packed_max_diff", max_diff(ours, naive_stats(z, temp)))
        checks.nonfinite(f"packed_nonfinite {name}", *ours.values())
        if name == "fp32":
            alone = {k: torch.cat([s[k] for s in by_row]) for k in ours}
            checks.add("packed_vs_rows_max_diff fp32", "packed_vs_rows_max_diff", max_diff(ours, alone))
        del ours, z
    del logits, model
    return {**res, "checks": checks.rows}


def random_ids(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, vocab, (n, length), generator=g).tolist()


def score(model, device, bounds: dict, prompt: int, response: int, batches: list[int]) -> dict:
    """One batch of B responses per case; an out-of-memory error is recorded and the next case runs."""
    import numpy as np
    import torch

    from devenus.select.config import MODEL_SIGNALS
    from devenus.select.score import forward_signals

    vocab, checks, cases = model.config.vocab_size, Checks(bounds), []
    for b in batches:
        tag = f"B={b} T={prompt + response}"
        prompts, responses = random_ids(b, prompt, vocab, 1), random_ids(b, response, vocab, 2)
        steps = [list(range(0, response, max(1, response // 8))) for _ in range(b)]  # 8 "steps" per response
        case = {"batch": b, "tokens_per_response": prompt + response, "signals": list(MODEL_SIGNALS)}
        out, oom = None, None
        try:
            with Meter(device) as m:
                out = forward_signals(model, prompts, responses, MODEL_SIGNALS, batch_size=b, step_starts=steps)
        except torch.OutOfMemoryError as e:
            oom = str(e).splitlines()[0][:300]
        if device.type == "cuda":  # what the failed forward held is released before the next case
            gc.collect()
            torch.cuda.empty_cache()
        checks.add(f"oom {tag}", "oom", int(oom is not None))
        if oom is not None:
            case["oom"] = oom
        else:
            toks = b * (prompt + response)
            case.update(seconds=m.seconds, peak_mb=m.mb, responses_per_s=b / m.seconds, tokens_per_s=toks / m.seconds)
            checks.add(f"nonfinite {tag}", "nonfinite", int(sum((~np.isfinite(v)).sum() for v in out.values())))
        cases.append(case)
    return {"cases": cases, "checks": checks.rows}


def inject_massive(model) -> list:
    """Forward hook on the first decoder layer: add ~1e3 to a few residual channels, varying per token
    (by the channel's own value), as massive activations do; later layers carry them on."""
    import torch

    def hook(_m, _inp, out):
        h = out[0] if isinstance(out, tuple) else out
        idx = torch.tensor(MASSIVE["channels"], device=h.device)
        mag = torch.tensor(MASSIVE["magnitudes"], device=h.device)
        h = h.clone()
        x = h[..., idx].float()
        h[..., idx] = (x + mag * (1 + 0.2 * torch.tanh(x))).to(h.dtype)  # rounded to the model's dtype, as a forward does
        return (h, *out[1:]) if isinstance(out, tuple) else h

    return [model.model.layers[0].register_forward_hook(hook)]


def coe(device, bounds: dict, shapes: dict, n: int, prompt: int, response: int) -> dict:
    import torch

    from devenus.select.score import forward_signals
    from devenus.signals.hidden import coe_scores

    model = build_model(shapes, device, torch.float32)
    inject_massive(model)
    prompts, responses = random_ids(n, prompt, shapes["vocab_size"], 6), random_ids(n, response, shapes["vocab_size"], 7)
    want = ("coe_r", "coe_c")
    fp32 = forward_signals(model, prompts, responses, want, batch_size=n)
    model.to(torch.bfloat16)
    # the same bf16 states pooled in float64 beside DE-Venus's pooling, in the same forward (hooks run in
    # registration order: the injection first, then these, then forward_signals' own)
    base = model.model
    pooled: dict[int, torch.Tensor] = {}

    def keep(li):
        def hook(_m, _inp, out):
            h = out[0] if isinstance(out, tuple) else out
            pooled[li] = h[:, prompt:prompt + response].double().mean(dim=1)  # every response: same lengths
        return hook

    mods = [base.embed_tokens, *list(base.layers)[:-1], base.norm]  # Hugging Face's hidden_states order
    handles = [m.register_forward_hook(keep(i)) for i, m in enumerate(mods)]
    try:
        bf16 = forward_signals(model, prompts, responses, want, batch_size=n)
    finally:
        for h in handles:
            h.remove()
    ref = {k: v.cpu().numpy() for k, v in coe_scores(torch.stack([pooled[i] for i in range(len(mods))], dim=1)).items()}
    checks, res = Checks(bounds), {"responses": n, "response_tokens": response, "layers": len(mods),
                                    "massive_channels": MASSIVE,
                                    "massive_pooled_abs_max": float(pooled[1][:, MASSIVE["channels"]].abs().max())}
    pool_err = bf16_err = 0.0
    for k in want:
        spread = float(fp32[k].std())
        res[f"{k}_fp32_spread"] = spread
        res[f"{k}_fp32_mean"] = float(fp32[k].mean())
        res[f"{k}_pool_max_diff"] = float(abs(bf16[k] - ref[k]).max())
        res[f"{k}_bf16_vs_fp32_max_diff"] = float(abs(bf16[k] - fp32[k]).max())
        pool_err = max(pool_err, res[f"{k}_pool_max_diff"] / spread)
        bf16_err = max(bf16_err, res[f"{k}_bf16_vs_fp32_max_diff"] / spread)
    checks.add("coe_pool_error_rel (bf16 pooling vs float64, same states)", "coe_pool_error_rel", pool_err)
    checks.add("coe_bf16_vs_fp32_rel", "coe_bf16_vs_fp32_rel", bf16_err)
    checks.nonfinite("coe_nonfinite", *[torch.as_tensor(v) for v in (*fp32.values(), *bf16.values())])
    del model
    return {**res, "checks": checks.rows}


def generate(model, device, batch: int, prompt: int, new: int, sampler: bool = True) -> dict:
    """``sampler``: the generation package's per-row sampler; without it, transformers' own sampling
    (the baseline, and a figure even where the sampler fails on the device)."""
    import torch
    from transformers import LogitsProcessorList

    from devenus.generate.sampler import RowSampler

    ids = torch.tensor(random_ids(batch, prompt, model.config.vocab_size, 3), device=device)
    if sampler:
        how = dict(do_sample=False, logits_processor=LogitsProcessorList([RowSampler(list(range(batch)), 1.0, 1.0)]),
                   temperature=None, top_p=None, top_k=None)
    else:
        how = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                             pad_token_id=0, eos_token_id=None, **how)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    made = int(out.shape[0] * (out.shape[1] - prompt))
    return {"batch": batch, "prompt": prompt, "new_tokens": made, "seconds": seconds, "new_tokens_per_s": made / seconds}


def geomin_pool(model, device, bounds: dict, rows: int, prompt: int, response: int) -> dict:
    import torch

    from devenus.adapters.verl.token_stats import ResponsePool, hidden_state_modules

    t = prompt + response
    ids = torch.tensor(random_ids(rows, t, model.config.vocab_size, 4), device=device)
    seq = torch.full((rows,), t)
    pool = ResponsePool(seq, torch.full((rows,), response), torch.ones(rows, response), packed=False, max_len=t)
    base = getattr(model, model.base_model_prefix)
    pool.hook(hidden_state_modules(model))
    try:
        with Meter(device) as m, torch.no_grad():
            base(input_ids=ids, use_cache=False)
            means = pool.means()
    finally:
        pool.remove()
    checks = Checks(bounds)
    checks.nonfinite("nonfinite pooled means", means)
    return {"rows": rows, "tokens": rows * t, "pooled_shape": list(means.shape), "seconds": m.seconds,
            "tokens_per_s": rows * t / m.seconds, "peak_mb": m.mb, "checks": checks.rows}


def build_model(shapes: dict, device, dtype):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    cfg = Qwen3Config(**shapes, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        except TypeError:  # transformers before 4.56 names it torch_dtype
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)
    return model.eval()


def failures(doc: dict) -> list[str]:
    """Every section not ok and every check over its bound, one line each."""
    bad = []
    for name, sec in doc["sections"].items():
        if sec["status"] != "ok":
            bad.append(f"{name}: {sec['status']}: {sec.get('error', '')}")
            continue
        res = sec.get("result")
        for label, c in (res.get("checks", {}) if isinstance(res, dict) else {}).items():
            if not c["pass"]:
                bad.append(f"{name}: {label} = {c['value']} > {c['bound']} ({c['bound_name']})")
    return bad


def table(doc: dict) -> str:
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = [f"gpu_check ({doc['mode']}, strict={doc['strict']}): {doc.get('env', {})}"]
    for name, sec in doc["sections"].items():
        head = f"[{name}] {sec['status']} in {sec.get('seconds', 0):.1f} s"
        if sec["status"] != "ok":
            lines.append(f"{head}: {sec.get('error', '')}")
            continue
        lines.append(head)
        res = sec["result"] if isinstance(sec.get("result"), dict) else {}
        scalars = {k: v for k, v in res.items() if isinstance(v, (int, float, str)) and k != "checks"}
        if scalars:
            lines.append("  " + ", ".join(f"{k}={fmt(v)}" for k, v in scalars.items()))
        for r in res.get("cases", []):
            lines.append("  " + ", ".join(f"{k}={fmt(v)}" for k, v in r.items() if not isinstance(v, list)))
        for label, c in res.get("checks", {}).items():
            lines.append(f"  {'ok  ' if c['pass'] else 'FAIL'} {label}: {fmt(c['value'])} <= {fmt(c['bound'])}")
    lines.append("passed" if not doc["failures"] else f"{len(doc['failures'])} failure(s):")
    lines += [f"  {f}" for f in doc["failures"]]
    return "\n".join(lines)


def default_out(toy: bool) -> Path:
    """``$OUT/gpu_check.json`` where ``$OUT`` is set (the device machine returns only ``$OUT``), else the temp dir."""
    name = "gpu_check_toy.json" if toy else "gpu_check.json"
    return Path(os.environ["OUT"]) / name if os.environ.get("OUT") else Path(tempfile.gettempdir()) / f"devenus_{name}"


def parse_bounds(overrides: list[str]) -> dict:
    bounds = dict(BOUNDS)
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep or name not in BOUNDS:
            raise SystemExit(f"gpu_check: --bound-override {item!r}: expected NAME=VALUE, NAME one of {sorted(BOUNDS)}")
        try:
            bounds[name] = float(value)
        except ValueError:
            raise SystemExit(f"gpu_check: --bound-override {item!r}: {value!r} is not a number") from None
    return bounds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toy", action="store_true", help="tiny shapes on the CPU (what the test runs)")
    ap.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                    help="exit 1 on a failed or skipped section or a measurement over its bound "
                         "(default: on where CUDA is available)")
    ap.add_argument("--bound-override", action="append", default=[], metavar="NAME=VALUE",
                    help=f"replace a bound (repeatable); names: {', '.join(BOUNDS)}")
    ap.add_argument("--out", default=None, help="JSON path (default: $OUT/gpu_check.json where $OUT is set, "
                                                "else <tmp>/devenus_gpu_check[_toy].json)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="total time; sections after it are skipped")
    ap.add_argument("--only", default=None, help="comma-separated sections to run")
    args = ap.parse_args(argv)
    bounds = parse_bounds(args.bound_override)
    t_start = time.perf_counter()
    toy = 1 if args.toy else 0
    out = Path(args.out) if args.out else default_out(bool(toy))
    out.parent.mkdir(parents=True, exist_ok=True)
    import torch

    strict = torch.cuda.is_available() if args.strict is None else args.strict
    doc: dict = {"mode": "toy (CPU)" if toy else "Qwen3-4B shapes (GPU, bf16)", "strict": strict, "bounds": bounds,
                 "bound_overrides": args.bound_override, "sections": {}, "failures": []}

    def write():
        from devenus.atomic import write_text_atomic

        doc["failures"] = failures(doc)
        write_text_atomic(out, json.dumps(doc, indent=1, default=str))

    only = set(args.only.split(",")) if args.only else None
    model_sections = {"build_model", "kernels", "score", "generate", "generate_plain", "geomin_pool"}

    def section(name, fn, *a, **kw):
        if only is not None and name not in only and not (name == "build_model" and only & model_sections):
            return None
        if args.budget_s - (time.perf_counter() - t_start) <= 0:
            doc["sections"][name] = {"status": "skipped", "error": "time budget spent"}
            return None
        t0 = time.perf_counter()
        try:
            res = fn(*a, **kw)
            kept = res if isinstance(res, (dict, list)) else {"built": type(res).__name__}  # not the model itself
            doc["sections"][name] = {"status": "ok", "seconds": time.perf_counter() - t0, "result": kept}
            return res
        except Exception as e:  # one failure must not lose the other sections
            doc["sections"][name] = {"status": "failed", "seconds": time.perf_counter() - t0,
                                     "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300],
                                     "traceback": traceback.format_exc()[-2000:]}
            return None
        finally:
            write()  # what finished so far survives a kill

    doc["env"] = section("imports", check_imports) or {}
    if not toy and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device (use --toy for the CPU check)")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 bounds assume fp32 matmuls
    device = torch.device("cpu" if toy else "cuda")
    shapes = TOY if toy else QWEN3_4B
    section("packed", packed, device, bounds, TOY if toy else PACKED, **SIZES["packed"][toy])
    section("coe", coe, device, bounds, TOY if toy else COE, **SIZES["coe"][toy])
    model = section("build_model", build_model, shapes, device, torch.bfloat16)
    if model is not None:
        doc["env"]["parameters"] = sum(p.numel() for p in model.parameters())
        section("kernels", kernels, model, device, bounds, **SIZES["kernels"][toy])
        section("score", score, model, device, bounds, **SIZES["score"][toy])
        section("generate", generate, model, device, **SIZES["generate"][toy])
        section("generate_plain", generate, model, device, **SIZES["generate"][toy], sampler=False)
        section("geomin_pool", geomin_pool, model, device, bounds, **SIZES["pool"][toy])
    doc["total_seconds"] = time.perf_counter() - t_start
    write()
    print(table(doc))
    print(f"wrote {out}")
    return 1 if strict and doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
