"""The selected version trains as it is: select 16 testbed-pool questions x 4 samples (annotate the
most uncertain quarter, discard the least uncertain quarter, weak for the rest), then 2 steps of TTRL
through ``python -m devenus.train`` on the materialized Parquet (annotated rows keep their verified
reward, weak rows get majority-vote targets)."""

import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")
sys.path.insert(0, str(Path(__file__).parents[1] / "adapters" / "verl"))

from e2e import train, train_steps  # noqa: E402

from devenus.runs.testbed import RunConfig   # noqa: E402
from devenus.records import read_records   # noqa: E402
from devenus.select.config import load_config   # noqa: E402
from devenus.select.pipeline import run_all   # noqa: E402

pytestmark = pytest.mark.slow


def test_selected_version_trains_with_ttrl(base_testbed, tmp_path):
    cfg = load_config(None, {"out": str(tmp_path / "select"), "limit": 16, "shard_size": 8,
                             "generate.samples": 4, "route.signal": "self_certainty",
                             "route.rho_annotate": 0.25, "route.rho_discard": 0.25})
    m = run_all(cfg, progress=False, model=base_testbed.load_model())
    rows = read_records(m.output_path)
    sources = sorted(r["extra_info"]["label_source"] for r in rows)
    assert sources == ["annotated"] * 4 + ["none"] * 8
    run = RunConfig(method="ttrl", steps=2, prompts_per_step=4, rollouts_per_prompt=4, train_file=str(m.output_path),
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    r = train(base_testbed, tmp_path / "train", run)
    assert r.ok, r.tail(60)
    steps = train_steps(r)
    assert set(steps) == {1, 2}
    for s in steps.values():
        assert math.isfinite(s["actor/grad_norm"])
