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
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

from devenus.config import Config, ConfigError, option
from devenus.runs.launch import RunResult, launch
from devenus.runs.logs import scores_per_question
from devenus.testbed import Testbed


class RunConfigError(ConfigError):
    """A testbed run that cannot start; one line naming the key."""


@dataclass
class RunConfig(Config):
    """One testbed run's size and schedule (typed and bounded by :mod:`devenus.config`; a path may be given
    as a ``Path``)."""

    key_path: ClassVar[str] = "run"
    error: ClassVar[type[ConfigError]] = RunConfigError

    method: str = option("grpo", "the registered method to train (devenus.method)")
    steps: int = option(30, "training steps (trainer.total_training_steps); validation runs after the last", ge=1)
    prompts_per_step: int = option(16, "prompts per step (data.train_batch_size)", ge=1)
    rollouts_per_prompt: int = option(8, "rollouts per prompt (actor_rollout_ref.rollout.n)", ge=1)
    lr: float = option(2e-4, "the actor's learning rate", gt=0.0)
    kl_coef: float = option(0.0, "KL loss coefficient against the reference (0: no KL loss)", ge=0.0)
    max_response_length: int = option(96, "tokens per response", ge=1)
    val_n: int = option(4, "validation samples per question (T=1)", ge=1)
    seed: int = option(0, "data order, rollouts and validation samples", ge=0)
    train_file: str | None = option(None, "training records (default: the testbed's train split)")
    val_files: tuple[str, ...] = option((), "validation records (default: the testbed's two test splits)")
    model_dir: str | None = option(None, "base model folder (default: the testbed's; e.g. devenus.smollm2.model_dir())")
    max_prompt_length: int = option(64, "prompt tokens: the testbed's bare questions (a chat template needs more)",
                                    ge=1)
    micro_batch: int = option(0, "rows per forward (0: the whole step where it fits); bounds the [rows, T, vocab] "
                                 "logits", ge=0)
    save_freq: int = option(-1, "checkpoint every this many steps (-1: never)", ge=-1)
    ckpt_to_keep: int = option(2, "checkpoints kept (verl keeps every one unless told; 2 leave a spare to resume "
                                  "from)", ge=1)
    val_before_train: bool = option(True, "the step-0 evaluation (several runs from one base can share one)")
    val_only: bool = option(False, "evaluate the base model and stop")
    extra_overrides: tuple[str, ...] = option((), "more verl/DE-Venus overrides, applied last (they win)")

    @classmethod
    def override(cls, key: str, value: str = "...") -> str:
        return f"RunConfig({key}={value})"

    def __post_init__(self) -> None:
        for name in ("train_file", "model_dir"):  # a Path is a path
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        if isinstance(self.val_files, (list, tuple)):
            self.val_files = tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in self.val_files)
        super().__post_init__()

    def check(self) -> None:
        if not self.method:
            raise self.error(f"{self.key('method')} is empty: name a registered method (set it with "
                             f"{self.override('method', 'grpo')})")
        if self.save_freq == 0:
            raise self.error(f"{self.key('save_freq')} must be -1 (never) or >= 1, got 0 "
                             f"(set it with {self.override('save_freq')})")


def checkpoint_dir(out_dir: str | Path) -> Path:
    """Where a run of :func:`overrides` keeps verl's checkpoints (``trainer.default_local_dir``)."""
    return Path(out_dir) / "checkpoints"


def evidence_dir(out_dir: str | Path) -> Path:
    """Where such a run's evidence table lands: the trainer writes it under ``default_local_dir``."""
    return checkpoint_dir(out_dir) / "evidence"


def overrides(tb: Testbed | None, out_dir: Path, cfg: RunConfig) -> list[str]:
    """The run's overrides; ``tb`` fills in the data and model ``cfg`` leaves out (None: ``cfg`` names all three)."""
    if tb is None and not (cfg.train_file and cfg.val_files and cfg.model_dir):
        raise ValueError("a run without a testbed names its train_file, val_files and model_dir")
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
