"""Co-rewarding I through ``python -m devenus.train``: paired testbed views (hidden labels), both views of
a question in every step via the pair sampler, two steps on the CPU; plus its setup errors."""

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl.train import SetupError, check_setup  # noqa: E402
from devenus.runs.testbed import RunConfig  # noqa: E402
from devenus.records import hide_labels, read_records, write_records  # noqa: E402
from devenus.records.pairs import pair_views  # noqa: E402
from e2e import compose, train, train_steps # noqa: E402


@pytest.fixture(scope="module")
def data(base_testbed, tmp_path_factory):
    d = tmp_path_factory.mktemp("corewarding_data")
    paired = pair_views(read_records(base_testbed.split("train")), read_records(base_testbed.split("train_paraphrase")))
    write_records(hide_labels(paired, 0.1, seed=0), d / "paired_hidden10.parquet")
    write_records(hide_labels(read_records(base_testbed.split("train")), 0.1, seed=0), d / "unpaired_hidden10.parquet")
    return d


@pytest.mark.parametrize("train, batch, message", [
    ("unpaired_hidden10.parquet", 4, "training data is not paired (build it with `devenus data pair-views`)"),
    ("paired_hidden10.parquet", 5, "data.train_batch_size must be even"),
])
def test_pairing_errors_before_ray(data, train, batch, message):
    cfg = compose("devenus.method=corewarding", f"data.train_files={data / train}", f"data.val_files={data / train}",
                  f"data.train_batch_size={batch}")
    with pytest.raises(SetupError) as e:
        check_setup(cfg)
    assert message in str(e.value)
    if train.startswith("unpaired"):
        assert "'testbed/train/add/00000'" in str(e.value)  # the keys are named


@pytest.mark.slow
@pytest.mark.extended
def test_corewarding_end_to_end(base_testbed, data, tmp_path):
    cfg = RunConfig(method="corewarding", steps=2, prompts_per_step=4, rollouts_per_prompt=4,
                    train_file=str(data / "paired_hidden10.parquet"),
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    r = train(base_testbed, tmp_path, cfg)
    rc, log = r.returncode, r.output()
    assert rc == 0, log[-6000:]
    assert "[devenus] train sampler: PairSampler" in log
    steps = train_steps(r)
    assert set(steps) == {1, 2}
    for s in steps.values():
        assert s["devenus/corewarding/pairs"] == 2  # 4 prompts = 2 questions x 2 views, every step
        assert s.get("devenus/corewarding/missing_partner_share", 0.0) == 0.0
        for key in ("devenus/corewarding/majority_ratio", "devenus/corewarding/both_majority_share",
                    "devenus/target/constructed_share", "actor/grad_norm"):
            assert key in s, key
    assert any("devenus/corewarding/view_agreement" in s for s in steps.values())
    assert any("devenus/target/accuracy" in s for s in steps.values())
