"""Train on the CPU testbed through verl's real trainer (``python -m devenus.train``) and report.

The recipe is a list of ordinary verl Hydra overrides sized for the testbed (one core, ~1M-parameter
model) plus DE-Venus's method selection; the same entry point takes GPU-sized overrides at scale.
Held-out accuracy comes from verl's own validation (T=1, ``val_n`` samples per question) on the
testbed's test splits, dumped per sample by ``trainer.validation_data_dir`` and summarised here with
question-clustered 95% confidence intervals.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from devenus.evaluate.compare import question_of_dump
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
    micro = math.gcd(64, cfg.prompts_per_step * cfg.rollouts_per_prompt)
    val = [str(tb.split("test_id")), str(tb.split("test_ood"))]
    return [
        f"devenus.method={cfg.method}",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train}",
        f"data.val_files=[{','.join(val)}]",
        f"data.train_batch_size={cfg.prompts_per_step}",
        "data.max_prompt_length=64",
        f"data.max_response_length={cfg.max_response_length}",
        f"data.seed={cfg.seed}",
        f"actor_rollout_ref.model.path={tb.model_dir}",
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
        "trainer.logger=[console]",
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


@dataclass
class RunResult:
    returncode: int
    wall_s: float
    log: Path
    metrics: list[dict]  # per training step, parsed from verl's console logger
    validation: dict[int, dict]  # step -> accuracy table (see accuracy_from_dump)


_STEP_RE = re.compile(r"(?:^|\s)step:(\d+) - (.*)$")
_NP_RE = re.compile(r"^np\.\w+\((.*)\)$")


def parse_console_metrics(lines: Sequence[str]) -> list[dict]:
    """verl's console logger prints ``step:N - key:value - key:value``; return one dict per line."""
    out = []
    for line in lines:
        m = _STEP_RE.search(re.sub(r"\x1b\[[0-9;]*m", "", line.strip()))
        if not m:
            continue
        d: dict = {"step": int(m.group(1))}
        for part in m.group(2).split(" - "):
            k, _, v = part.rpartition(":")
            v = _NP_RE.sub(r"\1", v.strip())
            try:
                d[k] = float(v)
            except ValueError:
                d[k] = v
        out.append(d)
    return out


def run(tb: Testbed, out_dir: str | Path, cfg: RunConfig, on_line: Callable[[str], None] | None = None,
        timeout_s: float | None = None) -> RunResult:
    """Train through ``python -m devenus.train`` in a subprocess; its full output goes to ``out_dir/train.log``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "train.log"
    cmd = [sys.executable, "-m", "devenus.train", *overrides(tb, out_dir.resolve(), cfg)]
    t0 = time.perf_counter()
    lines: list[str] = []
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                f.write(line)
                lines.append(line)
                if on_line:
                    on_line(line)
                if timeout_s and time.perf_counter() - t0 > timeout_s:
                    proc.kill()
                    break
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
    return RunResult(proc.returncode, time.perf_counter() - t0, log, parse_console_metrics(lines),
                     accuracy_from_dump(tb, out_dir / "validation"))


def accuracy_from_dump(tb: Testbed, dump_dir: Path) -> dict[int, dict]:
    """Per validation step, accuracy by split (ID, OOD/<family>, OOD) with question-clustered CIs."""
    from devenus.records import read_records
    from devenus.testbed.evaluate import summarize

    if not dump_dir.exists():
        return {}
    family = {}
    for split in ("test_id", "test_ood"):
        for r in read_records(tb.split(split)):
            family[r["extra_info"]["question"]] = "ID" if split == "test_id" else f"OOD/{r['extra_info']['family']}"
    out = {}
    for path in sorted(dump_dir.glob("*.jsonl"), key=lambda p: int(p.stem)):
        per_q: dict[str, list[float]] = {}
        for line in path.read_text().splitlines():
            e = json.loads(line)
            per_q.setdefault(question_of_dump(e["input"]), []).append(float(e["score"]))
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
        out[int(path.stem)] = table
    return out
