"""A GRPO step on SmolLM2-135M-Instruct, phase by phase: verl's phases against plain PyTorch on the same batch.

    python bench/smollm2_phases.py [--steps 3] [--skip 1] [--reps 2] [--out DIR]

bench/step_breakdown.py's two arms (see its doc) on the real model instead of the testbed's: the verl arm
is ``devenus.smollm2.run_config`` (4 prompts x 4 rollouts, <= 96 new tokens, fp32, micro-batches of 4,
no validation) through ``python -m devenus.train`` on the CPU backend, on 2-digit testbed additions phrased
for a chat model (``devenus.smollm2.chat_split``); the plain arm is ``model.generate`` of the same prompts
(SmolLM2's chat template, the same 4 x 4 samples, the same cap), the reward, a no-grad forward for the
log-probs, forward + backward + clip + AdamW, and a ``load_state_dict`` into a second copy, in this
process. Prints verl / plain per phase. Needs the smollm2 extra (docs/smollm2.md). ~6-8 min on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import step_breakdown  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="verl training steps")
    ap.add_argument("--skip", type=int, default=1, help="warm-up steps left out of the verl medians")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of the plain step")
    ap.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    ap.add_argument("--attn", default="eager", help="attention of the plain arm (the CPU backend's actor and "
                                                     "rollout run eager)")
    args = ap.parse_args()
    if args.steps <= args.skip + 1:
        ap.error("--steps must be at least --skip + 2")

    from devenus import smollm2
    from devenus.records import read_records
    from devenus.testbed import build_testbed

    out = Path(args.out or tempfile.mkdtemp(prefix="devenus-smollm2-phases-"))
    tb = build_testbed()
    model = smollm2.model_dir()
    prompts = 4
    train = smollm2.chat_split(tb, "train", out / "data" / "train.parquet", prompts * args.steps, difficulty=2)
    val = smollm2.chat_split(tb, "test_id", out / "data" / "val.parquet", 4)
    cfg = smollm2.run_config("grpo", train, val, steps=args.steps, prompts=prompts, model=model,
                             val_before_train=False, extra_overrides=step_breakdown.NO_VAL)
    print(f"[bench] SmolLM2-135M-Instruct ({model}); {cfg.prompts_per_step} prompts x {cfg.rollouts_per_prompt} "
          f"rollouts, <= {cfg.max_response_length} new tokens, micro-batch {cfg.micro_batch}", flush=True)
    rows = read_records(train)[:prompts]
    step_breakdown.compare(tb, cfg, skip=args.skip, reps=args.reps, out=out / "run", rows=rows, model_dir=model,
                           attn=args.attn)


if __name__ == "__main__":
    sys.exit(main())
