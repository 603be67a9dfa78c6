"""A training run sized for the CPU testbed: the overrides of ``python -m devenus.train`` and their report.

:func:`overrides` is a list of ordinary verl Hydra overrides sized for the testbed (one core,
~1M-parameter model) plus DE-Venus's method selection; the same entry point takes GPU-sized overrides
at scale (``devenus.recipes.gpu``). :func:`run` launches them through :func:`devenus.runs.launch`.
Held-out accuracy comes from verl's own validation (T=1, ``val_n`` samples per question) on the
testbed's test splits, dumped per sample by ``trainer.validation_data_dir`` and summarised by
:func:`accuracy_by_split` with question-clustered 95% confidence intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from devenus.runs.launch import RunResult, launch
from devenus.runs.logs import scores_per_question
from devenus.testbed import Testbed


@dataclass
class RunConfig:
    method: str = "grpo"
    steps: int = 30
    prompts_per_step: int = 16
    rollouts_per_prompt: int = 8
    lr: float = 2e-4
    kl_coef: float = 0.0
    max_response_length: int = 96
    val_n: int = 4
    seed: int = 0
    train_file: str | None = None  # default: the testbed's train split
    val_files: Sequence[str] = ()  # default: the testbed's two test splits
    model_dir: str | None = None  # default: the testbed's base model (e.g. devenus.smollm2.model_dir())
    max_prompt_length: int = 64  # the testbed's bare questions; a chat template with a worked turn needs more
    micro_batch: int = 0  # rows per forward (0: the whole step where it fits); bounds the [rows, T, vocab] logits
    save_freq: int = -1
    ckpt_to_keep: int = 2  # verl keeps every checkpoint unless told; the last two leave a spare to resume from
    val_before_train: bool = True  # the step-0 evaluation (several runs from one base can share one)
    val_only: bool = False  # evaluate the base model and stop
    extra_overrides: Sequence[str] = field(default_factory=tuple)


def checkpoint_dir(out_dir: str | Path) -> Path:
    """Where a run of :func:`overrides` keeps verl's checkpoints (``trainer.default_local_dir``)."""
    return Path(out_dir) / "checkpoints"


def evidence_dir(out_dir: str | Path) -> Path:
    """Where such a run's evidence table lands: the trainer writes it under ``default_local_dir``."""
    return checkpoint_dir(out_dir) / "evidence"


def overrides(tb: Testbed, out_dir: Path, cfg: RunConfig) -> list[str]:
    train = cfg.train_file or str(tb.split("train"))
    # micro-batches must divide the step's rows: the whole step in one forward where it fits
    micro = math.gcd(cfg.micro_batch or 64, cfg.prompts_per_step * cfg.rollouts_per_prompt)
    val = [str(v) for v in cfg.val_files] or [str(tb.split("test_id")), str(tb.split("test_ood"))]
    return [
        f"devenus.method={cfg.method}",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train}",
        f"data.val_files=[{','.join(val)}]",
        f"data.train_batch_size={cfg.prompts_per_step}",
        f"data.max_prompt_length={cfg.max_prompt_length}",
        f"data.max_response_length={cfg.max_response_length}",
        f"data.seed={cfg.seed}",
        f"actor_rollout_ref.model.path={cfg.model_dir or tb.model_dir}",
        f"actor_rollout_ref.actor.optim.lr={cfg.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={cfg.prompts_per_step}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.actor.use_kl_loss={cfg.kl_coef > 0}",
        f"actor_rollout_ref.actor.kl_loss_coef={cfg.kl_coef}",
        "actor_rollout_ref.actor.entropy_coeff=0",
        # a ~1M-parameter model trains in fp32 (bf16 autocast is slower on a CPU and loses precision)
        "actor_rollout_ref.actor.fsdp_config.dtype=float32",
        "actor_rollout_ref.ref.fsdp_config.dtype=float32",
        f"actor_rollout_ref.actor.data_loader_seed={cfg.seed}",
        f"actor_rollout_ref.rollout.n={cfg.rollouts_per_prompt}",
        # the rollout server decodes a step's rollouts as one batch the moment the last one arrives
        # (a partial batch waits for a quiet 0.2 s; validation's 512 x val_n fills whole batches)
        f"actor_rollout_ref.rollout.max_num_seqs={cfg.prompts_per_step * cfg.rollouts_per_prompt}",
        "actor_rollout_ref.rollout.temperature=1.0",
        # top-50 sampling, in training and validation: what the testbed's published numbers were
        # measured with (the hf server used to apply transformers' default top_k=50 whatever verl's
        # top_k said; it now samples exactly as configured)
        "actor_rollout_ref.rollout.top_k=50",
        f"actor_rollout_ref.rollout.val_kwargs.n={cfg.val_n}",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=True",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
        "actor_rollout_ref.rollout.val_kwargs.top_k=50",
        f"actor_rollout_ref.rollout.seed={cfg.seed}",
        "trainer.logger=[console]",  # the run component adds verl's file tracker (devenus.runs.launch)
        "trainer.project_name=devenus_testbed",
        f"trainer.experiment_name={cfg.method}_s{cfg.seed}",
        f"trainer.total_training_steps={cfg.steps}",
        "trainer.total_epochs=100",
        f"trainer.val_before_train={cfg.val_before_train or cfg.val_only}",
        f"trainer.val_only={cfg.val_only}",
        f"trainer.test_freq={cfg.steps}",
        f"trainer.save_freq={cfg.save_freq}",
        f"trainer.max_actor_ckpt_to_keep={cfg.ckpt_to_keep}",
        f"trainer.max_critic_ckpt_to_keep={cfg.ckpt_to_keep}",
        f"trainer.default_local_dir={checkpoint_dir(out_dir)}",
        f"trainer.validation_data_dir={out_dir / 'validation'}",
        "trainer.resume_mode=auto",
        *cfg.extra_overrides,
    ]


def run(tb: Testbed, out_dir: str | Path, cfg: RunConfig, *, timeout_s: float | None = None,
        on_step: Callable[[dict], None] | None = None, env: dict[str, str] | None = None,
        stop=None) -> RunResult:
    """Train on the testbed through :func:`devenus.runs.launch` (output, metrics and dumps in ``out_dir``)."""
    out_dir = Path(out_dir).resolve()
    return launch(overrides(tb, out_dir, cfg), out_dir, timeout_s=timeout_s, on_step=on_step, env=env, stop=stop)


def split_of_question(tb: Testbed) -> dict[str, str]:
    """Question text -> ``ID`` or ``OOD/<family>``, over the testbed's two test splits."""
    from devenus.records import read_records

    family = {}
    for split in ("test_id", "test_ood"):
        for r in read_records(tb.split(split)):
            family[r["extra_info"]["question"]] = "ID" if split == "test_id" else f"OOD/{r['extra_info']['family']}"
    return family


def accuracy_by_split(tb: Testbed, dumps: dict[int, Path]) -> dict[int, dict]:
    """Per validation step, accuracy by split (ID, OOD/<family>, OOD) with question-clustered CIs."""
    from devenus.testbed.evaluate import summarize

    family = split_of_question(tb) if dumps else {}
    out = {}
    for step in sorted(dumps):
        per_q = scores_per_question(dumps[step])
        groups: dict[str, list[float]] = {}
        for q, scores in per_q.items():
            name = family.get(q)
            if name is None:
                continue
            mean = sum(scores) / len(scores)
            groups.setdefault(name, []).append(mean)
            if name.startswith("OOD/"):
                groups.setdefault("OOD", []).append(mean)
        k = max((len(s) for s in per_q.values()), default=0)
        table = {}
        for name in sorted(groups, key=lambda n: (n != "ID", n)):
            a = summarize(groups[name], k)
            table[name] = {"n": a.n_questions, "sampled": {"mean": a.mean, "ci95": a.ci95, "k": k}}
        out[step] = table
    return out
