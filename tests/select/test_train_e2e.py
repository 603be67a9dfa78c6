"""The selected version is a training input as it is: select 16 testbed-pool questions x 4 samples
(annotate the most uncertain quarter, discard the least uncertain quarter, weak for the rest), then the
TTRL run on the materialized Parquet goes through every check ``devenus.train`` makes before Ray starts
(the record contract, the row keys, TTRL's data needs, verl's config rules). It is not launched: training
TTRL on hidden-label data is tests/adapters/verl/test_votes_e2e.py's run, the same trainer path."""

import pytest

pytest.importorskip("verl")

from devenus.records import read_records  # noqa: E402
from devenus.runs.testbed import RunConfig, overrides  # noqa: E402
from devenus.select.config import load_config  # noqa: E402
from devenus.select.stages import run_all  # noqa: E402

pytestmark = pytest.mark.slow  # the selection itself generates and scores with the base model


def test_selected_version_passes_the_ttrl_runs_setup(base_testbed, tmp_path):
    from devenus.adapters.verl.cpu.launch import cpu_overrides
    from devenus.adapters.verl.train import preflight

    cfg = load_config(None, {"out": str(tmp_path / "select"), "limit": 16, "shard_size": 8,
                             "generate.samples": 4, "route.signal": "self_certainty",
                             "route.rho_annotate": 0.25, "route.rho_discard": 0.25})
    m = run_all(cfg, progress=False, model=base_testbed.load_model())
    rows = read_records(m.output_path)
    sources = sorted(r["extra_info"]["label_source"] for r in rows)
    assert sources == ["annotated"] * 4 + ["none"] * 8
    run = RunConfig(method="ttrl", steps=2, prompts_per_step=4, rollouts_per_prompt=4, train_file=str(m.output_path),
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    config = preflight([*cpu_overrides(), *overrides(base_testbed, (tmp_path / "train").resolve(), run)])
    assert config.data.train_files == str(m.output_path) and config.devenus.method == "ttrl"
