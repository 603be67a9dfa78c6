"""A real pretrained model on data nobody here wrote: SmolLM2-135M-Instruct trained through verl's real
trainer on the shipped DeepMind ``mathematics_dataset`` set (src/devenus/data/mathematics_dataset), through
the experiment runner (paired seeds, provenance, resumable). Plan: experiments/plans/real_model.md.

    devenus experiment real_model --quick            # every arm, seed 0
    devenus experiment real_model --full             # every arm, seeds 0-1 (about 90 min wall, 2 runs at a time)
    devenus experiment real_model --report           # the table from the results on disk

Arms: ``base`` (validation only), ``grpo`` (every label), ``ttrl`` (no label: majority-vote pseudo
rewards), ``semi@10`` (TTRL on the unlabeled 90%, the gold reward on the labeled 10%: 102 questions).
Every question is phrased with one solved question of its module before it
(``devenus.data.mathematics_dataset_worked``): with the shipped user turn alone SmolLM2 boxes almost no
answer (0 of 256 held-out samples scored on a first run), so no arm would have a reward to follow.
Labels are hidden with ``devenus.records.hide_labels``; a hidden answer stays as simulation truth for
TTRL's pseudo-target precision (a mechanism metric; no method reads it).
"""

from __future__ import annotations

from pathlib import Path

from devenus.experiments.definition import Budget, Definition
from devenus.experiments.runner import Arm, Experiment


def train_file(arm: Arm, seed: int, exp: Experiment) -> Path:
    """The shipped train split, phrased with its module's worked turn, with the arm's fraction of labels kept
    (seeded; written once, atomically)."""
    from devenus.data import mathematics_dataset_worked
    from devenus.records import hide_labels, write_records

    path = exp.work.resolve() / "data" / f"train_{arm.labeled_fraction:g}_s{seed}.parquet"  # absolute: Ray's workers
    if not path.exists():
        rows = mathematics_dataset_worked("train")
        write_records(rows if arm.labeled_fraction >= 1.0 else hide_labels(rows, arm.labeled_fraction, seed=seed), path)
    return path


def validation(work: Path) -> dict[str, Path]:
    """Every other question of the shipped ``test_id`` and ``test_ood`` phrased with the worked turn (the files
    are ordered by module, so each module keeps half its questions), written once."""
    from devenus.data import mathematics_dataset_worked
    from devenus.records import write_records

    out = {}
    for split in ("test_id", "test_ood"):
        path = out[split] = Path(work).resolve() / "data" / f"{split}_half.parquet"  # absolute: Ray's workers have no cwd
        if not path.exists():
            write_records(mathematics_dataset_worked(split)[::2], path)
    return out


DEFINITION = Definition(
    name="real_model",
    summary="SmolLM2-135M-Instruct on the shipped mathematics_dataset: GRPO, TTRL and TTRL with 10% labels",
    arms=(
        Arm("grpo", "grpo", 1.0),
        # the 0.5 agreement floor of the weak-supervision experiment (chosen there on training-side pseudo-label
        # accuracy): abstentions count as votes, so a group where most samples give no answer gets no target
        Arm("ttrl", "ttrl", 0.0, {"min_agreement": 0.5}, baseline="grpo", claimed_side=-1),
        Arm("semi@10", "ttrl", 0.1, {"min_agreement": 0.5}, baseline="ttrl", claimed_side=1),
    ),
    # Set before any finished run (not tuned; a first sizing of 10 x 8 x 8 with 512 held-out questions measured
    # 327 s a step and over 6 min a validation on the shared 2 cores and was stopped): 6 steps x 8 prompts x 4
    # rollouts (48 prompt visits of 1,024); lr 1e-5, ten times the smoke-test sizing's (devenus.smollm2.run_config),
    # so that a few steps can move a 135M model; no KL; 96 new tokens (the eval's). One sample per held-out
    # question at T=1 over every other question of each file (128 ID + 128 OOD, every module): seeds and
    # questions, not samples, are the lever here. max_prompt_length 192: the longest worked-turn prompt under
    # SmolLM2's template is 191 tokens (test_ood).
    budget=Budget(steps=6, prompts_per_step=8, rollouts_per_prompt=4, val_n=1, kl_coef=0.0, lr=1e-5,
                  max_response_length=96, max_prompt_length=192, micro_batch=8),
    seeds=(0, 1),
    train_file=train_file,
    validation=validation,
    model="smollm2",
)
