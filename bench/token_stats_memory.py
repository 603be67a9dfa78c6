"""Peak working memory of the chunked token statistics (self-certainty, entropy), in [chunk, V] float32
buffers; and, with ``--testbed``, DE-Venus's self-certainty against the reference formula on the testbed model.

    python bench/token_stats_memory.py [--vocab 151936] [--chunk 1024] [--tokens 2048]
    python bench/token_stats_memory.py --testbed

Each case runs in a fresh subprocess: it builds the logits, runs one small warm-up call (lazy torch
initialisation is not the computation's memory), reads the peak resident set size (``VmHWM`` in
/proc/self/status), runs :func:`devenus.signals.token_stats_from_logits` once and reads the peak again.
The difference is the computation's working memory; it is printed in MB and in units of one
``[chunk, V]`` float32 buffer. (tracemalloc does not see torch's allocations; the peak RSS does, since
torch's CPU allocator maps large buffers fresh and returns them on free.)

For comparison, ``reference`` runs the reference implementations' formula, ``logsumexp(z) - mean(z)``
over the whole ``[tokens, V]`` logits after an in-place division by the temperature, as
verl-intuitor's ``dp_actor.py`` does (no chunking): its working memory grows with the tokens, not the chunk.

``--testbed`` samples 8 responses (T=1) to each of 16 training questions with the testbed's base model,
recomputes their logits, and compares per token DE-Venus's SC (chunked, minus log V) with the
reference's ``logsumexp(z/T) - mean(z/T)``, and the group z-scores of the two response means (what GRPO sees).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = [  # (name, dtype, temperature, statistics)
    ("fp32, T=1, SC", "float32", 1.0, ("self_certainty",)),
    ("fp32, T=0.7, SC", "float32", 0.7, ("self_certainty",)),
    ("bf16, T=1, SC", "bfloat16", 1.0, ("self_certainty",)),
    ("bf16, T=0.7, SC", "bfloat16", 0.7, ("self_certainty",)),
    ("fp32, T=1, SC+H", "float32", 1.0, ("self_certainty", "entropy")),
    ("fp32, T=0.7, SC+H", "float32", 0.7, ("self_certainty", "entropy")),
    ("bf16, T=1, SC+H", "bfloat16", 1.0, ("self_certainty", "entropy")),
    ("bf16, T=0.7, SC+H", "bfloat16", 0.7, ("self_certainty", "entropy")),
    ("reference (unchunked), fp32, T=0.7, SC", "float32", 0.7, ("reference",)),
]


def vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_case(vocab: int, chunk: int, tokens: int, dtype: str, temperature: float, which: tuple) -> dict:
    import torch

    from devenus.signals import token_stats_from_logits

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(tokens, vocab, generator=g, dtype=getattr(torch, dtype))
    token_stats_from_logits(logits[:2], chunk_size=chunk, temperature=temperature)  # warm-up, tiny
    (torch.logsumexp(logits[:2].float(), dim=-1) - logits[:2].float().mean(dim=-1)).sum()
    before = vm_hwm_bytes()
    if which == ("reference",):
        logits.div_(temperature)  # the reference divides the model's logits in place
        torch.logsumexp(logits, dim=-1) - logits.mean(dim=-1)
    else:
        token_stats_from_logits(logits, chunk_size=chunk, temperature=temperature, which=which)
    delta = vm_hwm_bytes() - before
    return {"delta_bytes": delta, "buffers": delta / (chunk * vocab * 4)}


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
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--testbed", action="store_true", help="compare with the reference formula on the testbed model")
    ap.add_argument("--case", type=int, default=None, help=argparse.SUPPRESS)  # child process: one case
    args = ap.parse_args()
    if args.testbed:
        testbed_comparison()
        return
    if args.case is not None:
        _, dtype, temp, which = CASES[args.case]
        print(json.dumps(run_case(args.vocab, args.chunk, args.tokens, dtype, temp, which)))
        return
    unit = args.chunk * args.vocab * 4
    print(f"V = {args.vocab}, chunk = {args.chunk}, tokens = {args.tokens}; "
          f"one [chunk, V] float32 buffer = {unit / 1e9:.2f} GB")
    print(f"{'case':42s} {'peak extra (GB)':>16s} {'buffers':>8s}")
    for i, (name, *_rest) in enumerate(CASES):
        out = subprocess.run([sys.executable, __file__, "--vocab", str(args.vocab), "--chunk", str(args.chunk),
                              "--tokens", str(args.tokens), "--case", str(i)],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:42s} {r['delta_bytes'] / 1e9:16.2f} {r['buffers']:8.2f}")


if __name__ == "__main__":
    main()
