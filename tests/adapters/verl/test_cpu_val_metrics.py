"""The vectorised validation summary gives verl's own numbers, bit for bit."""

import json
import random

import pytest

pytest.importorskip("verl")
np = pytest.importorskip("numpy")

pytestmark = pytest.mark.verl


def _same(a, b) -> bool:
    # json of the nested dicts: float repr is exact, key order ignored
    return json.dumps(a, sort_keys=True, default=float) == json.dumps(b, sort_keys=True, default=float)


def _verl():
    from devenus.adapters.verl.cpu import val_metrics

    return val_metrics._verl_original()


def _case(seed: int):
    rng = random.Random(seed)
    sources, uids, info = [], [], {"reward": [], "acc": [], "pred": [], "score": [], "note": []}
    for q in range(30):
        k = rng.choice([1, 2, 3, 4, 4, 5, 8])
        src = rng.choice(["testbed/add", "testbed/count"])
        n_preds = rng.choice([1, 2, 3])
        for _ in range(k):
            sources.append(src)
            uids.append(f"q{q}")
            s = float(rng.random() < 0.4)
            info["reward"].append(s + rng.choice([0.0, 0.1, 0.25]))
            info["acc"].append(bool(s))
            info["score"].append(None if rng.random() < 0.1 else s)  # None values are dropped
            info["pred"].append(None if (q % 7 == 0 and rng.random() < 0.5) else str(rng.randrange(n_preds)))
            info["note"].append("text")  # string variables are skipped
    return sources, uids, info


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_verl_bit_for_bit(seed):
    from devenus.adapters.verl.cpu.val_metrics import process_validation_metrics

    sources, uids, info = _case(seed)
    ours = process_validation_metrics(sources, uids, info)
    assert _same(ours, _verl()(sources, uids, info))
    # and the majority vote really ran (it is the expensive part being replaced)
    assert any(k.startswith("maj@") for k in ours["testbed/add"]["acc"])


def test_integer_predictions_and_many_samples_match():
    from devenus.adapters.verl.cpu.val_metrics import process_validation_metrics

    rng = random.Random(5)
    n = 12  # subsets 2, 4, 8, 12
    uids = [f"u{i // n}" for i in range(6 * n)]
    info = {"score": [rng.choice([0, 1]) for _ in uids], "pred": [rng.randrange(3) for _ in uids]}
    sources = ["s"] * len(uids)
    assert _same(process_validation_metrics(sources, uids, info), _verl()(sources, uids, info))


def test_unsupported_values_fall_back_to_verl():
    from devenus.adapters.verl.cpu.val_metrics import process_validation_metrics

    uids = ["a", "a", "b", "b"]
    info = {"score": [1.0, float("nan"), 0.0, 1.0]}
    ours = process_validation_metrics(["s"] * 4, uids, info)
    ref = _verl()(["s"] * 4, uids, info)
    assert ours.keys() == ref.keys() and ours["s"]["score"].keys() == ref["s"]["score"].keys()


def test_global_rng_ends_where_verl_leaves_it():
    from devenus.adapters.verl.cpu.val_metrics import process_validation_metrics

    sources, uids, info = _case(3)
    _verl()(sources, uids, info)
    expected = np.random.random(4)
    np.random.seed(123)
    process_validation_metrics(sources, uids, info)
    assert np.array_equal(np.random.random(4), expected)


def test_install_rebinds_the_name_verl_calls():
    from verl.trainer.ppo import metric_utils, ray_trainer

    from devenus.adapters.verl.cpu import val_metrics

    assert val_metrics.install()
    assert metric_utils.process_validation_metrics is val_metrics.process_validation_metrics
    assert ray_trainer.process_validation_metrics is val_metrics.process_validation_metrics
    assert val_metrics._verl_original() is not val_metrics.process_validation_metrics
