"""``devenus train`` as a user runs it: the testbed's model, its train split and two small validation files of
the user's own, 2 GRPO steps through verl's real trainer. One line per step, a summary, and the checkpoint
at the path the summary prints. Extended: the default suite already trains through the same run component
(tests/experiments/test_runner_e2e.py); the sizing's pre-flight is checked fast in test_train_presets.py."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

from devenus.records import read_records, write_records  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.extended]


def test_devenus_train_on_the_testbed_saves_a_checkpoint_and_summarises(base_testbed, tmp_path):
    val = []
    for split in ("test_id", "test_ood"):  # a user's files: 16 questions each, their own data sources
        rows = read_records(base_testbed.split(split))[:16]
        for r in rows:
            r["data_source"] = f"my_{split}"
        val.append(str(write_records(rows, tmp_path / f"{split}.parquet")))
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "devenus", "train", "--model", "testbed", "--train",
                        str(base_testbed.split("train")), "--val", *val, "--steps", "2", "--out", str(out),
                        "--", "actor_rollout_ref.rollout.val_kwargs.n=2"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:] + (out / "train.log").read_text()[-3000:]
    lines = r.stdout.splitlines()
    steps = [ln for ln in lines if ln.startswith("step ")]
    assert [s.split(" |")[0] for s in steps] == ["step 0/2 (before training)", "step 1/2", "step 2/2"], r.stdout
    assert all(len(s) < 200 for s in steps)  # readable, not verl's whole dict
    assert re.search(r"\| reward \d\.\d{3} \| response length [\d.]+ \|.* s \| 128 rollouts$", steps[1]), steps[1]
    assert "val my_test_id " in steps[0] and "val my_test_id " in steps[2], steps
    assert "steps: 2" in lines
    assert re.search(r"^  my_test_ood: \d\.\d{3} avg@2 \(step 0: \d\.\d{3}\)$", r.stdout, re.M), r.stdout
    ckpt = Path(next(ln for ln in lines if ln.startswith("checkpoint: ")).removeprefix("checkpoint: "))
    assert ckpt == out.resolve() / "checkpoints" / "global_step_2"
    assert (ckpt / "actor").is_dir() and (ckpt / "data.pt").is_file()
    log = (out / "train.log").read_text()
    assert "'critic/score/mean'" not in log  # verl's console tracker is off: the full dict is in metrics/ only
    assert (out / "metrics" / "0.jsonl").stat().st_size > 0
