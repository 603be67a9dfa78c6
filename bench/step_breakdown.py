"""Where a testbed training step's time goes: each verl phase against its plain-PyTorch counterpart.

    python bench/step_breakdown.py [--steps 6] [--skip 1] [--reps 3] [--out DIR]

One run, two arms, one after the other (never in parallel, one torch thread each):

  verl   the testbed recipe (`devenus.runs.testbed`, the demo's settings: 16 prompts x 8
         rollouts, responses <= 96 tokens, fp32) through `python -m devenus.train` on the CPU backend,
         for --steps steps. Per phase: verl's own `timing_s/<phase>` metrics, median over steps
         after --skip. Start-up: the arrival time of each milestone line of the run's log.
  plain  the same model (the testbed's base model) and batch shape in plain PyTorch, in this process:
         gen            `model.generate` of the same 16 prompts x 8 samples in one left-padded batch
                        (KV cache, T=1, <= 96 new tokens) - what the hf rollout server does
         reward         `devenus.verify.reward.compute_score` on the 128 responses in a loop
         old_log_prob   one no-grad forward of the 128 sequences padded to the longest, log-probs of
                        the response tokens
         update_actor   forward + GRPO loss + backward per micro-batch of 64, then clip + AdamW step
         update_weights `load_state_dict` of the actor's weights into a second copy of the model
         The plain batch is the plain arm's own generation from the base model, so its length is
         that of verl's first steps (both are printed); median over --reps repetitions.

The ratio column is verl / plain for the same phase. Timings swing +-20% on a shared 2-core box;
the ratio is measured within one run, so it does not depend on how busy the machine was that day
as much as absolute seconds do (the load average is printed).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# Milestones of a run's log, in the order they appear: (label, substring of the line).
MILESTONES = (
    ("ray started", "Started a local Ray instance"),
    ("TaskRunner up", "DeVenusTaskRunner pid="),
    ("FSDP worker up", "WorkerDict pid="),
    ("rollout server up", "HFRolloutServer pid="),
    ("step-0 validation: generation done", "validation generation end"),
    ("step-0 validation: metrics done", "Initial validation metrics"),
)
PHASES = ("gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "update_weights", "start_profile",
          "stop_profile", "step")


def tree_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this process's descendants that are still alive
    (the run's driver, Ray's processes and workers: a local Ray cluster is started by the driver)."""
    import psutil

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def verl_arm(tb, cfg, out: Path) -> dict:
    """``cfg`` (a :class:`devenus.runs.testbed.RunConfig`) through ``python -m devenus.train``."""
    from devenus.runs.testbed import run

    t0 = time.perf_counter()
    arrivals: list[tuple[float, str]] = []  # (seconds since launch, log line), for the start-up milestones
    step_cpu: dict[int, float] = {}  # tree CPU seconds when step N's metrics reached verl's file tracker
    done = threading.Event()

    def tail(log: Path) -> None:  # timestamps the log's lines as they are written
        while not log.exists() and not done.is_set():
            time.sleep(0.05)
        with open(log, errors="replace") as f:
            while True:
                line = f.readline()
                if line:
                    arrivals.append((time.perf_counter() - t0, line))
                elif done.is_set():
                    return
                else:
                    time.sleep(0.05)

    def on_step(m: dict) -> None:
        step_cpu[m["step"]] = tree_cpu_s()

    out = Path(out).resolve()
    tailer = threading.Thread(target=tail, args=(out / "train.log",), daemon=True)
    tailer.start()
    res = run(tb, out, cfg, on_step=on_step)
    done.set()
    tailer.join()
    if res.returncode != 0:
        raise SystemExit(f"verl arm failed (exit {res.returncode}); log: {res.log}")
    seen: dict[str, float] = {}
    for label, needle in MILESTONES:
        for t, line in arrivals:
            if needle in line:
                seen[label] = t
                break
    first_step_line = next((t for t, line in arrivals if "step:1 -" in line), None)
    m1 = next((m for m in res.metrics if m["step"] == 1), {})
    if first_step_line is not None and "timing_s/step" in m1:
        seen["first step starts"] = first_step_line - m1["timing_s/step"] - m1.get("timing_s/start_profile", 0.0)
    cpu_per_step = [step_cpu[k] - step_cpu[k - 1] for k in sorted(step_cpu) if k - 1 in step_cpu]
    return {"metrics": res.metrics, "milestones": seen, "wall": res.wall_s, "validation": res.validation,
            "step_cpu": step_cpu, "cpu_per_step": cpu_per_step}


def plain_arm(reps: int, max_new_tokens: int, rows: list[dict], n_samples: int, micro: int, lr: float,
              model_dir, attn: str = "sdpa") -> dict:
    """The step of the module doc in plain PyTorch/HF on the model in ``model_dir``, prompts ``rows``."""
    import torch

    from devenus.verify.reward import compute_score

    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
    copy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
    n_prompts = len(rows)
    prompts = [tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True) for r in rows]
    if isinstance(prompts[0], dict) or hasattr(prompts[0], "input_ids"):
        prompts = [p["input_ids"] for p in prompts]
    eos = tok.eos_token_id
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    times: dict[str, list[float]] = {k: [] for k in ("gen", "reward", "old_log_prob", "update_actor", "update_weights", "step",
                                                     "step_cpu")}
    shape = None
    for rep in range(reps):
        torch.manual_seed(rep)
        t_step, c_step = time.perf_counter(), time.process_time()
        # --- gen: one left-padded batch, n_samples per prompt, like the hf server
        batch = [p for p in prompts for _ in range(n_samples)]
        plen = max(len(p) for p in batch)
        ids = torch.full((len(batch), plen), pad, dtype=torch.long)
        am = torch.zeros_like(ids)
        for i, p in enumerate(batch):
            ids[i, plen - len(p):] = torch.tensor(p)
            am[i, plen - len(p):] = 1
        t = time.perf_counter()
        model.eval()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=am, do_sample=True, temperature=1.0, top_p=1.0,
                                 top_k=None, max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=pad)
        times["gen"].append(time.perf_counter() - t)
        resp = []
        for row in out[:, plen:].tolist():
            n = next((j + 1 for j, x in enumerate(row) if x == eos), len(row))
            resp.append(row[:n])
        # --- reward
        t = time.perf_counter()
        scores = []
        for r, toks in zip([r for r in rows for _ in range(n_samples)], resp):
            scores.append(compute_score(r["data_source"], tok.decode(toks, skip_special_tokens=True),
                                        r["reward_model"]["ground_truth"], r["extra_info"])["score"])
        times["reward"].append(time.perf_counter() - t)
        # --- the training batch: prompt + response, right-padded to the longest sequence
        seqs = [p + r for p, r in zip(batch, resp)]
        L = max(len(s) for s in seqs)
        shape = (len(seqs), L, max(len(p) for p in batch), max(len(r) for r in resp))
        x = torch.full((len(seqs), L), pad, dtype=torch.long)
        mask = torch.zeros_like(x)
        rmask = torch.zeros((len(seqs), L - 1))
        for i, (p, s) in enumerate(zip(batch, seqs)):
            x[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
            rmask[i, len(p) - 1 : len(s) - 1] = 1  # positions whose next token is a response token
        adv = torch.tensor(scores).view(n_prompts, n_samples)
        adv = ((adv - adv.mean(1, keepdim=True)) / (adv.std(1, keepdim=True) + 1e-6)).view(-1, 1)

        def logp(m, xb, mb):
            logits = m(input_ids=xb, attention_mask=mb).logits[:, :-1].float()
            return torch.log_softmax(logits, -1).gather(-1, xb[:, 1:].unsqueeze(-1)).squeeze(-1)

        # --- old_log_prob: one no-grad forward pass (in micro-batches, as verl does)
        t = time.perf_counter()
        with torch.no_grad():
            old = torch.cat([logp(model, x[i:i + micro], mask[i:i + micro]) for i in range(0, len(x), micro)])
        times["old_log_prob"].append(time.perf_counter() - t)
        # --- update_actor: one mini-batch = the whole step, micro-batches of `micro`, one AdamW step
        t = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        n_tok = rmask.sum()
        for i in range(0, len(x), micro):
            lp = logp(model, x[i:i + micro], mask[i:i + micro])
            ratio = torch.exp(lp - old[i:i + micro])
            a = adv[i:i + micro]
            loss = -(torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a) * rmask[i:i + micro]).sum() / n_tok
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times["update_actor"].append(time.perf_counter() - t)
        # --- update_weights
        t = time.perf_counter()
        copy.load_state_dict({k: v.detach().clone() for k, v in model.state_dict().items()})
        times["update_weights"].append(time.perf_counter() - t)
        times["step"].append(time.perf_counter() - t_step)
        times["step_cpu"].append(time.process_time() - c_step)
    return {"times": times, "shape": shape}


def compare(tb, cfg, *, skip: int, reps: int, out: Path, rows: list[dict], model_dir, attn: str = "sdpa") -> None:
    """Both arms on ``cfg``'s batch shape (plain before and after verl) and the table of the module doc."""
    micro = math.gcd(cfg.micro_batch or 64, cfg.prompts_per_step * cfg.rollouts_per_prompt)

    def plain(n):
        return plain_arm(n, cfg.max_response_length, rows, cfg.rollouts_per_prompt, micro, cfg.lr, model_dir, attn)

    # the plain arm runs before and after the verl arm, so that a change in the machine's load
    # during the run weighs on both arms alike
    loads = [os.getloadavg()[0]]
    print(f"[bench] plain arm ({(reps + 1) // 2} reps) ...", flush=True)
    p = plain((reps + 1) // 2)
    print(f"[bench] verl arm: {cfg.steps} steps (log: {out / 'train.log'}) ...", flush=True)
    loads.append(os.getloadavg()[0])
    v = verl_arm(tb, cfg, out)
    loads.append(os.getloadavg()[0])
    if reps // 2:
        print(f"[bench] plain arm ({reps // 2} reps) ...", flush=True)
        more = plain(reps // 2)
        for k in p["times"]:
            p["times"][k] += more["times"][k]
    loads.append(os.getloadavg()[0])

    ms = [m for m in v["metrics"] if m["step"] > skip and "timing_s/step" in m]

    def verl_times(key):
        return [m[key] for m in ms if key in m]

    print(f"\nverl: steps {skip + 1}..{cfg.steps}; plain: {reps} reps; load average at the arms' "
          f"boundaries {' -> '.join(f'{x:.1f}' for x in loads)} ({os.cpu_count()} cores)")
    vl = [statistics.median(verl_times(k)) for k in ("prompt_length/max", "response_length/max", "response_length/mean")]
    print(f"batch: verl prompt/response max {vl[0]:.0f}/{vl[1]:.0f} (response mean {vl[2]:.1f}); "
          f"plain {p['shape'][0]} x {p['shape'][1]} tokens (prompt/response max {p['shape'][2]}/{p['shape'][3]})")
    print("seconds; min = least contended, the ratio that counts; median for the spread\n")
    print(f"{'phase':22} {'verl min':>9} {'verl med':>9} {'plain min':>9} {'plain med':>9} {'ratio min':>9} {'ratio med':>9}")
    pt = p["times"]
    plain_of = {"gen": [g + r for g, r in zip(pt["gen"], pt["reward"])]}  # verl scores inside its gen phase
    names = {"gen": "gen (+ reward)"}
    for ph in PHASES:
        vt = verl_times(f"timing_s/{ph}")
        if not vt or ph == "reward":
            continue
        pl = plain_of.get(ph, pt.get(ph))
        row = f"{names.get(ph, ph):22} {min(vt):9.3f} {statistics.median(vt):9.3f}"
        if pl:
            row += (f" {min(pl):9.3f} {statistics.median(pl):9.3f} {min(vt) / min(pl):9.2f}"
                    f" {statistics.median(vt) / statistics.median(pl):9.2f}")
        print(row)
    # CPU seconds per step: every process of the run vs the plain step's own (what load cannot inflate
    # much). The last step's window holds the final validation: left out.
    cps = v["cpu_per_step"][skip:-1] if len(v["cpu_per_step"]) > skip + 1 else v["cpu_per_step"]
    if cps:
        vc, pc = statistics.median(cps), statistics.median(pt["step_cpu"])
        print(f"{'step, CPU s':22} {min(cps):9.3f} {vc:9.3f} {min(pt['step_cpu']):9.3f} {pc:9.3f} "
              f"{min(cps) / min(pt['step_cpu']):9.2f} {vc / pc:9.2f}   (all the run's processes / the plain step)")
    testing = [m["timing_s/testing"] for m in v["metrics"] if "timing_s/testing" in m]
    if testing:
        print(f"{'final validation':22} {testing[-1]:9.3f}")
    print("\nstart-up (seconds since launch, from the arrival of each line of the run's log):")
    for label, t in sorted(v["milestones"].items(), key=lambda kv: kv[1]):
        print(f"  {t:7.1f}  {label}")
    if 0 in v["step_cpu"]:
        print(f"  CPU seconds of all the run's live processes by the step-0 validation's end: {v['step_cpu'][0]:.1f}")
    print(f"run wall time {v['wall']:.1f} s")


NO_VAL = ("trainer.val_before_train=False", "trainer.test_freq=-1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="verl training steps")
    ap.add_argument("--skip", type=int, default=1, help="warm-up steps left out of the verl medians")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of the plain step")
    ap.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    ap.add_argument("--no-val", action="store_true", help="no step-0 or final validation (start-up without it)")
    ap.add_argument("--attn", default="sdpa", help="attention of the plain arm (sdpa or eager)")
    ap.add_argument("extra", nargs="*", help="extra verl overrides for the verl arm")
    args = ap.parse_args()
    if args.steps <= args.skip + 1:
        ap.error("--steps must be at least --skip + 2")

    from devenus.records import read_records
    from devenus.runs.testbed import RunConfig
    from devenus.testbed import build_testbed

    out = Path(args.out or tempfile.mkdtemp(prefix="devenus-step-breakdown-"))
    extra = tuple(args.extra) + (NO_VAL if args.no_val else ())
    tb = build_testbed()
    cfg = RunConfig(steps=args.steps, extra_overrides=extra)
    rows = read_records(tb.split("train"))[:cfg.prompts_per_step]
    compare(tb, cfg, skip=args.skip, reps=args.reps, out=out, rows=rows, model_dir=tb.model_dir, attn=args.attn)


if __name__ == "__main__":
    sys.exit(main())
