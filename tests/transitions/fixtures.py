"""D(k) and an evidence table of proposals for the transition tests and bench/transition_crash.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from devenus.records.evidence import EvidenceWriter, record_dataset
from devenus.records.rows import make_row
from devenus.records.versions import write_version


def make_dataset(path: Path, n: int = 40, seed: int = 0) -> Path:
    """Rows k0..k{n-1}: even ones labeled (every fourth with a wrong label "9"), odd ones unlabeled; the
    hidden answer is str(i)."""
    rows = []
    for i in range(n):
        labeled = i % 2 == 0
        noisy = labeled and i % 4 == 0
        rows.append(make_row(data_source="arith", index=f"k{i}", source="test", question=f"what is {i}?",
                             ground_truth=("9" if noisy else str(i)) if labeled else "", labeled=labeled,
                             simulation={"hidden_answer": str(i), "noise": "inactive" if noisy else "none"},
                             validate=False))
    write_version(rows, path, rule="test", force=True)
    return path


def make_evidence(folder: Path, data: Path, n: int = 40, round: int = 0) -> Path:
    """Proposals of both methods: promotions of the odd rows (some weak), corrections of the noisy rows
    (some wrong), plus visit rows; two proposals for k1 (the later one decides)."""
    record_dataset(folder, [str(data)], round)
    with EvidenceWriter(folder, method="trapo2", round=round) as w:
        for i in range(1, n, 2):
            rate = 0.875 if i % 3 else 0.625  # every third below min_pass_rate
            w.append(f"k{i}", 3, "visit", majority_answer=str(i), majority_pass_rate=rate)
            w.append(f"k{i}", 3, "proposal", majority_answer=str(i), majority_pass_rate=rate,
                     values={"rule": "promote", "field": "reward_model.ground_truth", "before": "",
                             "after": str(i), "slope": 0.1, "probes": 3, "answered": 3})
        w.append("k1", 5, "proposal", majority_answer="1", majority_pass_rate=1.0,
                 values={"rule": "promote", "field": "reward_model.ground_truth", "before": "", "after": "1",
                         "slope": 0.05, "probes": 4, "answered": 4})
    with EvidenceWriter(folder, method="nl_olr2", round=round) as w:
        for i in range(0, n, 4):
            wrong = i % 12 == 0  # k0, k12, k24, k36: a wrong candidate
            w.append(f"k{i}", 4, "proposal", majority_answer=str(i), majority_pass_rate=0.875, target_pass_rate=0.0,
                     values={"rule": "correct", "field": "reward_model.ground_truth", "before": "9",
                             "after": str(i + 1) if wrong else str(i), "margins": [0.5, 0.75, 0.875],
                             "candidate_pass_rate": 0.875, "label_pass_rate": 0.0})
    return folder


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "devenus.cli", "transition", *args]


def kill_at(cmd: list[str], delay: float, env=None) -> int | None:
    """Start ``cmd`` in its own process group, SIGKILL the group after ``delay`` s; its exit code if it
    finished first, else None."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    try:
        return p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def timed_run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0
