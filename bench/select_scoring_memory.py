"""Peak extra memory (and time) of the selection scorer's entropy + self-certainty, against today's
online route (full ``[T, V]`` logits, then the token-chunked statistics), at a 151,936-wide vocabulary.

    python bench/select_scoring_memory.py [--tokens 1024 2048 4096 8192] [--baseline-max 2048]

The testbed model gets a synthetic wide head (a random ``Linear(d, 151936)``) and a longer position
range; one response of T tokens after a short prompt. Each case runs in a fresh subprocess: set up the
model and inputs, a tiny warm-up, reset the peak RSS to the current RSS (``/proc/self/clear_refs``), run the case, read the
peak (``VmHWM``); the difference is the case's working memory (torch's CPU allocator maps big buffers fresh and returns
them, so the peak RSS sees them; tracemalloc does not).

Cases, per T:
- ``stats: streaming``: :func:`devenus.signals.head.token_stats_from_hidden` on the ``[T, d]`` final
  hidden states (token x vocabulary chunks): the scorer's cost.
- ``stats: logits + chunked`` (baseline, T <= --baseline-max): ``head(h)`` -> ``[T, V]`` logits, then
  :func:`devenus.signals.token_stats_from_logits` (chunk 1024): what the online path does.
- ``forward: all signals``: :func:`devenus.select.score.forward_signals` (entropy, SC, CoE-R, CoE-C,
  CoT-Kinetics) against ``forward: plain`` (the model's own forward returning its logits), same input.
- ``forward: + pivot_trace``: the same plus PivotTrace (w = 256, query chunks of 256, steps every 16 tokens).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

VOCAB = 151_936


def status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def reset_peak() -> int:
    """Reset the peak RSS to the current RSS (``echo 5 > /proc/self/clear_refs``); returns the RSS."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status("VmRSS")


def run_case(case: str, tokens: int) -> dict:
    import torch

    from devenus.select.score import forward_signals
    from devenus.signals import token_stats_from_logits
    from devenus.signals.head import token_stats_from_hidden
    from devenus.testbed import build_testbed

    torch.set_num_threads(1)
    model, tok = build_testbed(log=lambda *_: None).load_model()
    d = model.config.hidden_size
    g = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(d, VOCAB, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(VOCAB, d, generator=g) * 0.05)
    model.lm_head = head
    model.config.vocab_size = VOCAB
    model.config.max_position_embeddings = tokens + 64
    model.eval()
    prompt = list(range(3, 19))
    resp = torch.randint(3, len(tok), (tokens,), generator=g).tolist()
    ids = torch.tensor([prompt + resp])
    with torch.no_grad():
        hidden = model.model(input_ids=ids).last_hidden_state[0, len(prompt) - 1: -1].contiguous()
        # warm-up: tiny calls of each path (lazy initialisation is not the case's memory)
        token_stats_from_hidden(hidden[:2], head.weight)
        token_stats_from_logits(head(hidden[:2]))
        forward_signals(model, [prompt], [resp[:4]])
        model(input_ids=ids[:, :8])
    before = reset_peak()
    t0 = time.perf_counter()
    with torch.no_grad():
        if case == "stats: streaming":
            token_stats_from_hidden(hidden, head.weight)
        elif case == "stats: logits + chunked":
            token_stats_from_logits(head(hidden))
        elif case == "forward: all signals":
            forward_signals(model, [prompt], [resp])
        elif case == "forward: + pivot_trace":
            from devenus.select.config import MODEL_SIGNALS

            forward_signals(model, [prompt], [resp], MODEL_SIGNALS, step_starts=[list(range(0, tokens, 16))])
        elif case == "forward: plain":
            model(input_ids=ids).logits.sum()
        else:
            raise ValueError(case)
    return {"seconds": time.perf_counter() - t0, "extra_mb": (status("VmHWM") - before) / 2**20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--baseline-max", type=int, default=2048,
                    help="largest T for the full-logits baseline (its [T, V] logits alone are 0.6 GB per 1k tokens)")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run_case(a.case, a.one)))
        return
    print(f"vocabulary {VOCAB}; extra peak RSS per case (fresh process each); time on 1 thread")
    print(f"{'T':>6}  {'case':<26} {'extra MB':>9} {'seconds':>8}")
    for t in a.tokens:
        res = {}
        for case in ("stats: streaming", "stats: logits + chunked", "forward: all signals", "forward: + pivot_trace",
                     "forward: plain"):
            if case in ("stats: logits + chunked", "forward: plain") and t > a.baseline_max:
                continue
            out = subprocess.run([sys.executable, __file__, "--case", case, "--one", str(t)], capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                raise SystemExit(1)
            res[case] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{t:>6}  {case:<26} {res[case]['extra_mb']:>9.1f} {res[case]['seconds']:>8.2f}", flush=True)
        if "stats: logits + chunked" in res:
            r = res["stats: logits + chunked"]["extra_mb"] / max(res["stats: streaming"]["extra_mb"], 1e-9)
            print(f"{t:>6}  memory ratio baseline / streaming: {r:.1f}x")
        if "forward: plain" in res:
            r = res["forward: all signals"]["seconds"] / res["forward: plain"]["seconds"]
            m = res["forward: all signals"]["extra_mb"] / max(res["forward: plain"]["extra_mb"], 1e-9)
            print(f"{t:>6}  all-signals forward / plain forward: time {r:.2f}x, memory {m:.2f}x")


if __name__ == "__main__":
    main()
