"""Fixtures for the verl CPU backend tests: a tiny Qwen3 model, a byte-level BPE tokenizer, a Parquet
of addition questions in verl's row format and a custom reward file.

Also a script: ``python tests/adapters/verl/verl_cpu_fixtures.py OUT_DIR`` builds them into OUT_DIR.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from devenus.testbed.tokenizer import IM_END, IM_START, PAD  # one tokenizer for the whole project

DATA_SOURCE = "devenus/add"


def _question(a: int, b: int) -> str:
    return f"What is {a}+{b}? Put the final answer in \\boxed{{}}."


def _solution(a: int, b: int) -> str:
    return f"{a}+{b}={a + b}\n\\boxed{{{a + b}}}"


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        out.append(f"{IM_START}user\n{_question(a, b)}{IM_END}\n{IM_START}assistant\n{_solution(a, b)}{IM_END}\n")
    return out


def build_tokenizer(vocab_size: int = 320):
    from devenus.testbed.tokenizer import build_tokenizer as testbed_build_tokenizer

    return testbed_build_tokenizer(corpus(), vocab_size=vocab_size)


def build_model_dir(out: Path, hidden: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """Tiny Qwen3 (random init) + tokenizer saved together, as verl loads them."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    eos, pad = tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(PAD)
    cfg = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(out)
    GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=eos).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def build_parquet(path: Path, n: int, seed: int, split: str) -> Path:
    import pandas as pd

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": _question(a, b)}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"index": f"{split}-{i}", "split": split},
            }
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


REWARD_FILE = '''"""Test reward for the verl CPU e2e run: boxed-answer correctness plus a small dense term.

Correctness uses devenus.verify.reward.compute_score when it is importable. The dense term
(0.1 x the fraction of digit characters in the response) only exists so that an untrained model
gets reward variance inside a GRPO group, hence non-zero advantages and a non-zero gradient.
"""
import re


def _correct(data_source, solution_str, ground_truth, extra_info=None):
    try:
        from devenus.verify.reward import compute_score as verify_score
    except Exception:
        verify_score = None
    if verify_score is not None:
        r = verify_score(data_source, solution_str, ground_truth, extra_info=extra_info)
        return float(r["score"] if isinstance(r, dict) else r)
    m = re.findall(r"\\\\boxed\\{([^{}]*)\\}", solution_str)
    return float(bool(m) and m[-1].strip() == str(ground_truth).strip())


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    acc = _correct(data_source, solution_str, ground_truth, extra_info)
    digits = sum(c.isdigit() for c in solution_str) / max(1, len(solution_str))
    return {"score": acc + 0.1 * digits, "acc": acc}
'''


def write_reward_file(path: Path) -> Path:
    path = Path(path)
    path.write_text(REWARD_FILE)
    return path


def build_all(out: Path, n_train: int = 16, n_val: int = 8) -> dict[str, Path]:
    out = Path(out)
    return {
        "model": build_model_dir(out / "model"),
        "train": build_parquet(out / "data" / "train.parquet", n_train, seed=1, split="train"),
        "val": build_parquet(out / "data" / "val.parquet", n_val, seed=2, split="val"),
        "reward": write_reward_file(out / "reward_fn.py"),
    }


if __name__ == "__main__":
    paths = build_all(Path(sys.argv[1]))
    for k, v in paths.items():
        print(f"{k}={v}")


# ------------------------------------------------------------------------------ running main_ppo
def ppo_command(
    fx: dict, ckpt_dir: Path, total_steps: int, extra: list[str] | None = None, n_ranks: int = 1
) -> list[str]:
    """``python -m verl.trainer.main_ppo`` for the fixtures: legacy trainer, GRPO, n=4, 4 prompts a
    step, 64-token responses, KL loss (so the ref model runs), save and validate every 2 steps."""
    from devenus.adapters.verl.cpu.launch import cpu_overrides

    micro = max(1, 16 // n_ranks)  # 4 prompts x n=4 = 16 samples a step, split over the ranks
    return [
        sys.executable, "-m", "verl.trainer.main_ppo",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={fx['train']}",
        f"data.val_files={fx['val']}",
        "data.train_batch_size=4",
        "data.max_prompt_length=64",
        "data.max_response_length=64",
        f"actor_rollout_ref.model.path={fx['model']}",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        f"reward.custom_reward_function.path={fx['reward']}",
        "reward.custom_reward_function.name=compute_score",
        f"trainer.total_training_steps={total_steps}",
        "trainer.save_freq=2",
        "trainer.test_freq=2",
        "trainer.val_before_train=True",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={ckpt_dir}",
        "trainer.project_name=devenus_cpu",
        "trainer.experiment_name=e2e",
        *cpu_overrides(n_ranks=n_ranks),
        *(extra or []),
    ]


def run_monitored(cmd: list[str], env: dict, cwd: Path, log_path: Path, timeout: float) -> dict:
    """Run ``cmd`` in its own session, log its output, sample the summed RSS of its process tree each
    second, and on exit or timeout kill whatever is left of the tree (by pid, only what it started)."""
    import os
    import signal
    import subprocess
    import time

    import psutil

    t0 = time.monotonic()
    seen: dict[int, psutil.Process] = {}
    peak_tree, peak_single, peak_pss = 0, 0, 0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        root = psutil.Process(proc.pid)
        timed_out = False
        while proc.poll() is None:
            if time.monotonic() - t0 > timeout:
                timed_out = True
                break
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                procs = [root]
            total, total_pss = 0, 0
            for p in procs:
                seen.setdefault(p.pid, p)
                try:
                    rss = p.memory_info().rss
                    total_pss += getattr(p.memory_full_info(), "pss", 0)
                except psutil.Error:
                    continue
                total += rss
                peak_single = max(peak_single, rss)
            peak_tree = max(peak_tree, total)
            peak_pss = max(peak_pss, total_pss)
            time.sleep(1.0)
        wall = time.monotonic() - t0
        # clean up: the session we created, then any straggler we saw
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for p in seen.values():
            try:
                if p.is_running():
                    p.kill()
            except psutil.Error:
                pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    return {
        "returncode": None if timed_out else proc.returncode,
        "timed_out": timed_out,
        "wall_s": wall,
        "peak_rss_tree_mb": peak_tree / 2**20,
        "peak_rss_process_mb": peak_single / 2**20,
        "peak_pss_tree_mb": peak_pss / 2**20,  # shared pages counted once
        "output": Path(log_path).read_text(errors="replace"),
    }


def metrics_logger(cmd: list[str], out_dir: Path) -> tuple[list[str], dict, Path]:
    """``cmd`` with verl's ``file`` tracker writing this launch's own ``<out_dir>/metrics/<n>.jsonl`` (the run
    component's :func:`devenus.runs.launch.file_logger`), the environment variable that names it, and the file."""
    from devenus.runs.launch import METRICS_DIR, file_logger

    (Path(out_dir) / METRICS_DIR).mkdir(parents=True, exist_ok=True)
    head, overrides = cmd[:3], cmd[3:]  # python -m <entry>
    overrides, path = file_logger(overrides, Path(out_dir))
    return [*head, *overrides], {"VERL_FILE_LOGGER_PATH": str(path)}, path


def read_step_metrics(path: Path) -> dict[int, dict[str, float]]:
    """verl's ``file`` tracker of one launch (:func:`devenus.runs.logs.read_metrics`) -> ``{step: {key: value}}``."""
    from devenus.runs.logs import read_metrics

    return {row["step"]: {k: v for k, v in row.items() if k != "step"} for row in read_metrics(Path(path))}


def parse_weight_syncs(output: str) -> list[dict]:
    """The hf rollout server's ``update_weights`` log lines, in order."""
    import re

    out = []
    pat = re.compile(
        r"\[devenus-hf-rollout\] update_weights replica=(\d+) version=(\d+) global_steps=(\S+) "
        r"tensors=(\d+) checksum=(\S+)"
    )
    for m in pat.finditer(output):
        out.append(
            {
                "replica": int(m.group(1)),
                "version": int(m.group(2)),
                "global_steps": None if m.group(3) == "None" else int(m.group(3)),
                "tensors": int(m.group(4)),
                "checksum": float(m.group(5)),
            }
        )
    return out
