"""The prepared GPU check: DE-Venus's own GPU work at Qwen3-4B's shapes, in one run, without verl, Ray or vLLM.

    python bench/gpu_check.py [--out gpu_check.json] [--budget-s 540]     # one NVIDIA GPU, bf16
    python bench/gpu_check.py --toy                                         # tiny shapes on the CPU (the test)

For the accelerator machine that is sometimes lent (one H200; torch, transformers, numpy, pandas,
pyarrow, scipy, scikit-learn; no verl, Ray, vLLM, network). ``devenus`` is imported from ``src/``
beside this file; the check fails at once if that pulls in verl, Ray or vLLM. The model is a
random-initialised Qwen3 with Qwen3-4B's shapes (36 layers, d 2560, 32/8 heads of 128, MLP 9728,
V 151,936, tied head) built from a ``Qwen3Config`` on the device in bf16: nothing is downloaded.

Sections, each timed and guarded (one failure is recorded with its one-line error and the next runs),
each skipped once the total ``--budget-s`` is spent:

- ``kernels``: at T = 1k, 2k, 4k, 8k in bf16, the online kernel
  (:func:`devenus.signals.token_stats_from_logits`, the verl adapter's defaults) against the naive
  whole-``[T, V]`` formula on the same logits, and the scorer's kernel
  (:func:`devenus.signals.head.token_stats_from_hidden`) against head-then-naive on the same hidden
  states: peak extra CUDA memory, time, and the largest difference from the naive result.
- ``score``: the selection score stage (:func:`devenus.select.score.forward_signals`) with every model
  signal (pivot_trace included) on random responses: responses/s, tokens/s, peak memory.
- ``generate``: HF generation as the selection generator runs it (``model.generate`` with its per-row
  sampler, :class:`devenus.select.generate.hf._RowSampler`): new tokens/s.
- ``generate_plain``: the same with transformers' own sampling (the baseline).
- ``geomin_pool``: GeoMin's hidden-state pooling (:class:`devenus.adapters.verl.token_stats.ResponsePool`
  on every ``hidden_states`` module, as the verl engine extension hooks it) in one forward: time, peak.

Writes the JSON (atomically) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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
# per-section shapes: (GPU, toy)
SIZES = {
    "tokens": ([1024, 2048, 4096, 8192], [16, 48]),
    "score": (dict(n=64, prompt=256, response=1024, batch_size=8), dict(n=6, prompt=8, response=24, batch_size=4)),
    "generate": (dict(batch=64, prompt=256, new=256), dict(batch=4, prompt=8, new=8)),
    "pool": (dict(rows=16, prompt=256, response=1024), dict(rows=3, prompt=8, response=16)),
}


class Clock:
    """The device's memory and time around one measured call."""

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
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        t = self.torch
        if self.cuda:
            t.cuda.synchronize()
        self.seconds = time.perf_counter() - self.t0
        self.peak_mb = (t.cuda.max_memory_allocated() - self.base) / 1e6 if self.cuda else None
        return False


def check_imports() -> dict:
    import devenus.adapters.verl.token_stats  # noqa: F401  (ResponsePool; verl is imported only by install())
    import devenus.select.generate.hf  # noqa: F401
    import devenus.select.score  # noqa: F401
    import devenus.signals  # noqa: F401

    pulled = sorted(m for m in sys.modules if m.split(".")[0] in ("verl", "ray", "vllm"))
    if pulled:
        raise RuntimeError(f"importing devenus pulled in {pulled}")
    import torch
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def naive_logits_stats(z, which):
    """The whole-width formula: one float32 [T, V] copy, full-width reductions (and the full softmax for H)."""
    import torch

    z = z.float()
    lse = torch.logsumexp(z, dim=-1)
    out = {"self_certainty": lse - z.mean(dim=-1) - torch.log(torch.tensor(float(z.shape[-1])))}
    if "entropy" in which:
        out["entropy"] = lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    return out


def kernels(model, device, tokens: list[int]) -> list[dict]:
    import torch

    from devenus.signals import DEFAULT_BUDGET_BYTES, DEFAULT_CHUNK_SIZE, chunk_rows, token_stats_from_logits
    from devenus.signals.head import token_stats_from_hidden

    head = model.get_output_embeddings().weight.detach()  # [V, d] bf16
    vocab, d = head.shape
    rows = []
    g = torch.Generator(device=device).manual_seed(0)
    warm = torch.randn(8, d, generator=g, device=device, dtype=head.dtype)  # kernel launches and caches, untimed
    token_stats_from_logits(warm @ head.T), naive_logits_stats(warm @ head.T, ("entropy",)), token_stats_from_hidden(warm, head)
    for t in tokens:
        hidden = torch.randn(t, d, generator=g, device=device, dtype=head.dtype)
        for which in (("self_certainty",), ("self_certainty", "entropy")):
            logits = (hidden @ head.T)  # [T, V] bf16: what verl's forward hands the online kernel
            res = {"T": t, "stats": "+".join("SC" if w == "self_certainty" else "H" for w in which)}
            with Clock(device) as c:
                ours = token_stats_from_logits(logits, which=which)
            res.update(online_s=c.seconds, online_mb=c.peak_mb)
            with Clock(device) as c:
                ref = naive_logits_stats(logits, which)
            res.update(naive_s=c.seconds, naive_mb=c.peak_mb,
                       online_max_diff=max(float((ours[k] - ref[k]).abs().max()) for k in which))
            del logits, ref
            with Clock(device) as c:
                sc = token_stats_from_hidden(hidden, head)
            res.update(scorer_s=c.seconds, scorer_mb=c.peak_mb)
            with Clock(device) as c:
                ref = naive_logits_stats(hidden @ head.T, which)
            res.update(scorer_naive_s=c.seconds, scorer_naive_mb=c.peak_mb,
                       scorer_max_diff=max(float((sc[k] - ref[k]).abs().max()) for k in which))
            del ref, sc, ours
            rows.append(res)
    rows.append({"online_chunk_tokens": chunk_rows(vocab, DEFAULT_CHUNK_SIZE, DEFAULT_BUDGET_BYTES),
                 "budget_mb": DEFAULT_BUDGET_BYTES / 1e6})
    return rows


def random_ids(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, vocab, (n, length), generator=g).tolist()


def score(model, device, n: int, prompt: int, response: int, batch_size: int) -> dict:
    from devenus.select.config import MODEL_SIGNALS
    from devenus.select.score import forward_signals

    vocab = model.config.vocab_size
    prompts, responses = random_ids(n, prompt, vocab, 1), random_ids(n, response, vocab, 2)
    steps = [list(range(0, response, max(1, response // 8))) for _ in range(n)]  # 8 "steps" per response
    with Clock(device) as c:
        out = forward_signals(model, prompts, responses, MODEL_SIGNALS, batch_size=batch_size, step_starts=steps)
    finite = {k: int(sum(v == v)) for k, v in out.items()}
    return {"signals": list(MODEL_SIGNALS), "responses": n, "tokens": n * (prompt + response), "seconds": c.seconds,
            "responses_per_s": n / c.seconds, "tokens_per_s": n * (prompt + response) / c.seconds,
            "peak_mb": c.peak_mb, "finite_values": finite}


def generate(model, device, batch: int, prompt: int, new: int, sampler: bool = True) -> dict:
    """``sampler``: the selection generator's per-row sampler; without it, transformers' own sampling
    (the baseline, and a figure even where the sampler fails on the device)."""
    import torch
    from transformers import LogitsProcessorList

    from devenus.select.generate.hf import _RowSampler

    ids = torch.tensor(random_ids(batch, prompt, model.config.vocab_size, 3), device=device)
    if sampler:
        how = dict(do_sample=False, logits_processor=LogitsProcessorList([_RowSampler(list(range(batch)), 1.0, 1.0)]),
                   temperature=None, top_p=None, top_k=None)
    else:
        how = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
    with Clock(device) as c, torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                             pad_token_id=0, eos_token_id=None, **how)
    made = int(out.shape[0] * (out.shape[1] - prompt))
    return {"batch": batch, "prompt": prompt, "new_tokens": made, "seconds": c.seconds,
            "new_tokens_per_s": made / c.seconds, "peak_mb": c.peak_mb}


def geomin_pool(model, device, rows: int, prompt: int, response: int) -> dict:
    import torch

    from devenus.adapters.verl.token_stats import ResponsePool, hidden_state_modules

    t = prompt + response
    ids = torch.tensor(random_ids(rows, t, model.config.vocab_size, 4), device=device)
    seq = torch.full((rows,), t)
    pool = ResponsePool(seq, torch.full((rows,), response), torch.ones(rows, response), packed=False, max_len=t)
    base = getattr(model, model.base_model_prefix)
    pool.hook(hidden_state_modules(model))
    try:
        with Clock(device) as c, torch.no_grad():
            base(input_ids=ids, use_cache=False)
            means = pool.means()
    finally:
        pool.remove()
    return {"rows": rows, "tokens": rows * t, "pooled_shape": list(means.shape), "seconds": c.seconds,
            "tokens_per_s": rows * t / c.seconds, "peak_mb": c.peak_mb}


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


def write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, path)


def table(doc: dict) -> str:
    lines = [f"gpu_check ({doc['mode']}): {doc.get('env', {})}"]
    for name, sec in doc["sections"].items():
        head = f"[{name}] {sec['status']} in {sec.get('seconds', 0):.1f} s"
        if sec["status"] != "ok":
            lines.append(f"{head}: {sec.get('error', '')}")
            continue
        lines.append(head)
        res = sec["result"]
        if name == "kernels":
            lines.append(f"  {'T':>5s} {'stats':>5s} {'online MB':>10s} {'naive MB':>9s} {'ratio':>6s} {'online ms':>10s} "
                         f"{'naive ms':>9s} {'scorer MB':>10s} {'naive MB':>9s} {'scorer ms':>10s} {'max diff':>9s}")
            for r in res:
                if "T" not in r:
                    lines.append(f"  online chunk {r['online_chunk_tokens']} tokens (budget {r['budget_mb']:.0f} MB)")
                    continue
                mb = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
                ratio = "-" if not r["online_mb"] else f"{r['naive_mb'] / r['online_mb']:.1f}x"
                lines.append(f"  {r['T']:5d} {r['stats']:>5s} {mb(r['online_mb']):>10s} {mb(r['naive_mb']):>9s} {ratio:>6s} "
                             f"{r['online_s'] * 1e3:10.1f} {r['naive_s'] * 1e3:9.1f} {mb(r['scorer_mb']):>10s} "
                             f"{mb(r['scorer_naive_mb']):>9s} {r['scorer_s'] * 1e3:10.1f} "
                             f"{max(r['online_max_diff'], r['scorer_max_diff']):9.1e}")
        else:
            lines.append("  " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in res.items()))
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toy", action="store_true", help="tiny shapes on the CPU (what the test runs)")
    ap.add_argument("--out", default=None, help="JSON path (default: bench/gpu_check[_toy].json)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="total time; sections after it are skipped")
    ap.add_argument("--only", default=None, help="comma-separated sections to run")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    toy = 1 if args.toy else 0
    out = Path(args.out) if args.out else ROOT / "bench" / ("gpu_check_toy.json" if toy else "gpu_check.json")
    doc: dict = {"mode": "toy (CPU)" if toy else "Qwen3-4B shapes (GPU, bf16)", "sections": {}}

    def section(name, fn, *a, **kw):
        if args.only and name not in args.only.split(","):
            return None
        left = args.budget_s - (time.perf_counter() - t_start)
        if left <= 0:
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
            write_json(out, doc)  # what finished so far survives a kill

    env = section("imports", check_imports)
    doc["env"] = env or {}
    import torch

    if not toy and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device (use --toy for the CPU check)")
    device = torch.device("cpu" if toy else "cuda")
    model = section("build_model", build_model, TOY if toy else QWEN3_4B, device, torch.bfloat16)
    if model is not None:
        doc["env"]["parameters"] = sum(p.numel() for p in model.parameters())
        section("kernels", kernels, model, device, SIZES["tokens"][toy])
        section("score", score, model, device, **SIZES["score"][toy])
        section("generate", generate, model, device, **SIZES["generate"][toy])
        section("generate_plain", generate, model, device, **SIZES["generate"][toy], sampler=False)
        section("geomin_pool", geomin_pool, model, device, **SIZES["pool"][toy])
    doc["total_seconds"] = time.perf_counter() - t_start
    write_json(out, doc)
    print(table(doc))
    print(f"wrote {out}")
    return doc


if __name__ == "__main__":
    main()
