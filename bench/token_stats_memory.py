"""Peak working memory of the online token statistics (self-certainty, entropy) beside the naive kernel,
in the same run; and, with ``--testbed``, DE-Venus's self-certainty against the reference formula on the testbed model.

    python bench/token_stats_memory.py [--vocab 151936] [--tokens 1024,2048,4096,8192]
    python bench/token_stats_memory.py --testbed

The online kernel is :func:`devenus.signals.token_stats_from_logits` at the verl adapter's defaults
(``chunk_size`` = :data:`DEFAULT_CHUNK_SIZE`, the memory budget :data:`DEFAULT_BUDGET_BYTES`, which
chooses the chunk: :func:`devenus.signals.chunk_rows`). The naive kernel is the reference
implementations' formula, ``logsumexp(z) - mean(z)`` over the whole ``[tokens, V]`` logits (float32,
after the division by the temperature, as verl-intuitor's ``dp_actor.py`` does, no chunking), plus the
full softmax for entropy. Every (dtype, statistics, T) case runs once per kernel.

Each case runs in a fresh subprocess: it builds the logits, runs one small warm-up call (lazy torch
initialisation is not the computation's memory), reads the peak resident set size (``VmHWM`` in
/proc/self/status), runs the kernel once and reads the peak again. The difference is the computation's
extra memory over the logits already held. (tracemalloc does not see torch's allocations; the peak RSS
does, since torch's CPU allocator maps large buffers fresh and returns them on free.) The bound the
online kernel must keep is 256 MB at V = 151,936, at every T.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = [  # (name, dtype, temperature, statistics)
    ("fp32, temp 0.7, SC", "float32", 0.7, ("self_certainty",)),
    ("bf16, temp 0.7, SC", "bfloat16", 0.7, ("self_certainty",)),
    ("fp32, temp 1, SC+H", "float32", 1.0, ("self_certainty", "entropy")),
    ("bf16, temp 0.7, SC+H", "bfloat16", 0.7, ("self_certainty", "entropy")),
]
BOUND_BYTES = 256e6  # issue 22: the online kernel's extra memory at V = 151,936, any T


def vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def naive_stats(logits, temperature: float, which: tuple) -> None:
    """The unchunked formula: one float32 ``[tokens, V]`` copy divided by the temperature, whole-width reductions."""
    import torch

    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    if "self_certainty" in which:
        lse - z.mean(dim=-1)
    if "entropy" in which:
        lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)


def run_case(vocab: int, tokens: int, dtype: str, temperature: float, which: tuple, kernel: str) -> dict:
    import torch

    from devenus.signals import token_stats_from_logits

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(tokens, vocab, generator=g, dtype=getattr(torch, dtype))
    token_stats_from_logits(logits[:2], temperature=temperature, which=which)  # warm-up, tiny
    naive_stats(logits[:2], temperature, which)
    before = vm_hwm_bytes()
    if kernel == "naive":
        naive_stats(logits, temperature, which)
    else:  # the adapter's defaults: DEFAULT_CHUNK_SIZE capped by DEFAULT_BUDGET_BYTES
        token_stats_from_logits(logits, temperature=temperature, which=which)
    return {"delta_bytes": vm_hwm_bytes() - before}


def testbed_comparison(temperatures=(1.0, 0.7), questions=16, n=8, seed=0) -> None:
    import math

    import numpy as np
    import torch

    from devenus.records import read_records
    from devenus.signals import group_normalize, mean_self_certainty, token_stats_from_logits
    from devenus.testbed import build_testbed
    from devenus.testbed.sampling import chat_prompt

    tb = build_testbed()
    model, tok = tb.load_model()
    model.eval()
    qs = [r["extra_info"]["question"] for r in read_records(tb.split("train"))[:questions]]
    tok.padding_side = "left"
    enc = tok([chat_prompt(tok, q) for q in qs for _ in range(n)], return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    with torch.no_grad():
        ids = model.generate(**enc, max_new_tokens=96, do_sample=True, temperature=1.0, top_p=None, top_k=None,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        p = enc["input_ids"].shape[1]
        resp = ids[:, p:]
        # valid response tokens: up to and including the first EOS
        is_eos = (resp == tok.eos_token_id).long()
        mask = ((is_eos.cumsum(1) - is_eos) == 0).long()
        attn = torch.cat([enc["attention_mask"], mask], dim=1)
        logits = model(input_ids=ids, attention_mask=attn).logits[:, p - 1:-1].float()  # predicts resp tokens
    vocab = logits.shape[-1]
    groups = np.repeat(np.arange(questions), n)
    print(f"testbed base model: {questions} questions x {n} sampled responses, {int(mask.sum())} response tokens, "
          f"V = {vocab}, log V = {math.log(vocab):.4f}")
    for t in temperatures:
        ours = token_stats_from_logits(logits, chunk_size=64, temperature=t, which=("self_certainty",))
        ours = ours["self_certainty"]
        z = (logits / t).double()  # the reference's formula, in float64 as the yardstick
        ref = torch.logsumexp(z, dim=-1) - z.mean(dim=-1)
        valid = mask.bool()
        diff = (ours.double() - ref)[valid]
        s_ours, s_ref = mean_self_certainty(ours, mask), mean_self_certainty(ref, mask)
        zs = np.abs(group_normalize(s_ours, groups) - group_normalize(s_ref, groups))
        print(f"T={t}: ours - reference per token: mean {diff.mean().item():+.6f} (-log V = {-math.log(vocab):+.6f}), "
              f"max |ours - (reference - log V)| = {(diff + math.log(vocab)).abs().max().item():.1e}; "
              f"max |group z-score difference| = {np.nanmax(zs):.1e}; "
              f"largest SC_t = {ours[valid].max().item():.2f} (log V = {math.log(vocab):.2f})")
    # the logits width V exceeds the tokenizer's size (padding rows); SC over the tokenizer's rows only
    # is not the full-width SC minus a constant: the padding rows' logits differ from token to token
    k = len(tok)
    if k < vocab:
        zk = logits[..., :k].double()
        part = torch.logsumexp(zk, dim=-1) - zk.mean(dim=-1) - math.log(k)
        full = token_stats_from_logits(logits, which=("self_certainty",))["self_certainty"].double()
        d = (full - part)[mask.bool()]
        s_full, s_part = mean_self_certainty(full, mask), mean_self_certainty(part, mask)
        rank_changes = np.mean([np.any(np.argsort(s_full[groups == g]) != np.argsort(s_part[groups == g]))
                                for g in range(questions)])
        print(f"tokenizer width {k} instead of the logits width {vocab} (T=1): per-token SC difference "
              f"{d.mean().item():+.3f} +- {d.std().item():.3f} (not a constant); groups whose order of "
              f"response scores changes: {rank_changes:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=151_936)  # Qwen2.5/3's logits width
    ap.add_argument("--tokens", default="1024,2048,4096,8192", help="comma-separated T list")
    ap.add_argument("--testbed", action="store_true", help="compare with the reference formula on the testbed model")
    ap.add_argument("--case", type=int, default=None, help=argparse.SUPPRESS)  # child process: one case
    ap.add_argument("--kernel", default="online", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.testbed:
        testbed_comparison()
        return
    if args.case is not None:
        _, dtype, temp, which = CASES[args.case]
        print(json.dumps(run_case(args.vocab, int(args.tokens), dtype, temp, which, args.kernel)))
        return
    from devenus.signals import DEFAULT_BUDGET_BYTES, DEFAULT_CHUNK_SIZE, chunk_rows

    rows = chunk_rows(args.vocab, DEFAULT_CHUNK_SIZE, DEFAULT_BUDGET_BYTES)
    print(f"V = {args.vocab}; online kernel at the adapter's defaults: chunk_size cap {DEFAULT_CHUNK_SIZE}, "
          f"budget {DEFAULT_BUDGET_BYTES / 2**20:.0f} MiB -> {rows} tokens per chunk; bound {BOUND_BYTES / 1e6:.0f} MB")
    print(f"{'case':22s} {'T':>5s} {'online MB':>10s} {'naive MB':>10s} {'naive/online':>13s} {'within':>7s}")
    worst = 0
    for t in [int(x) for x in args.tokens.split(",")]:
        for i, (name, *_rest) in enumerate(CASES):
            r = {}
            for kernel in ("online", "naive"):
                out = subprocess.run([sys.executable, __file__, "--vocab", str(args.vocab), "--tokens", str(t),
                                      "--case", str(i), "--kernel", kernel], capture_output=True, text=True, check=True)
                r[kernel] = json.loads(out.stdout.strip().splitlines()[-1])["delta_bytes"]
            worst = max(worst, r["online"])
            ratio = r["naive"] / max(r["online"], 1)
            print(f"{name:22s} {t:5d} {r['online'] / 1e6:10.1f} {r['naive'] / 1e6:10.1f} {ratio:12.1f}x "
                  f"{'yes' if r['online'] <= BOUND_BYTES else 'NO':>7s}", flush=True)
    print(f"largest online extra: {worst / 1e6:.1f} MB ({'within' if worst <= BOUND_BYTES else 'OVER'} "
          f"the {BOUND_BYTES / 1e6:.0f} MB bound)")


if __name__ == "__main__":
    main()
