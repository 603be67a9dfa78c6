"""The unsupervised trainer through DeVenusTrainer: where its rewards land (bare trainer, no Ray), and
``python -m devenus.train`` on the CPU testbed for 2 steps with every signal switched on.

The engine extension (self-certainty) is loaded in every Ray process through ``VERL_USE_EXTERNAL_MODULES``.
"""

import math

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
from verl import DataProto  # noqa: E402

from devenus.online.registry import WeakTrainerInterface  # noqa: E402
from devenus.runs.testbed import RunConfig  # noqa: E402
from test_surfaces import bare_trainer, make_batch  # noqa: E402
from e2e import train, train_steps # noqa: E402

PLUGIN_ENV = {"VERL_USE_EXTERNAL_MODULES": "devenus.adapters.verl.plugin"}


def rollouts():
    # group a: labeled (gold "1"); group b: unlabeled, majority "3" (rows 4, 5, 7), row 6 answers "2"
    prompts = make_batch([10] * 8, [True] * 4 + [False] * 4, ["1"] * 4 + [""] * 4,
                         ["1", "2", "1", "1", "3", "3", "2", "3"], ["a"] * 4 + ["b"] * 4)
    outputs = DataProto.from_dict(tensors={k: prompts.batch[k].clone() for k in ("responses", "response_mask", "rm_scores")})
    return prompts, outputs


def test_agreement_only_is_applied_at_rollout_time():
    m = WeakTrainerInterface.get("unsupervised").build({"w_entropy": 0.0, "w_agreement": 1.0, "normalize": "none"})
    t = bare_trainer(m)
    assert not t.rules.after_log_prob  # needs come from the weights: no token statistics, so no wait for the log-prob pass
    prompts, outputs = rollouts()
    labeled_before = outputs.batch["rm_scores"][:4].clone()
    out = t.on_rollouts(prompts, outputs)
    assert torch.equal(out.batch["rm_scores"][:4], labeled_before)  # verified rewards kept
    assert out.batch["rm_scores"][4:].sum(dim=1).tolist() == [1.0, 1.0, 0.0, 1.0]
    assert m.pop_metrics()["agreement/mean"] == pytest.approx(0.75)


def test_confidence_signals_wait_for_the_log_prob_pass():
    m = WeakTrainerInterface.get("unsupervised").build({"w_entropy": 1.0, "w_agreement": 0.0, "normalize": "center"})
    t = bare_trainer(m)
    assert t.rules.after_log_prob
    prompts, outputs = rollouts()
    out = t.on_rollouts(prompts, outputs)
    before = out.batch["rm_scores"].clone()
    assert torch.equal(before, prompts.batch["rm_scores"])  # nothing written before the log-prob pass
    nt = {k: prompts.non_tensor_batch[k] for k in ("uid", "extra_info", "reward_model")}
    batch = DataProto.from_dict(tensors={k: out.batch[k] for k in ("responses", "response_mask", "rm_scores")},
                                non_tensors={**nt, **{k: v for k, v in out.non_tensor_batch.items()}})
    entropy = torch.rand(8, 16, generator=torch.Generator().manual_seed(0))
    old = DataProto.from_dict(tensors={"old_log_probs": -entropy, "entropys": entropy})
    t._late_surfaces(batch, old)
    mask = batch.batch["response_mask"].bool()
    neg_h = np.array([-float(entropy[i][mask[i]].double().mean()) for i in range(8)])
    want = neg_h[4:] - neg_h[4:].mean()
    assert batch.batch["rm_scores"][4:].sum(dim=1).numpy() == pytest.approx(want, abs=1e-6)
    assert torch.equal(batch.batch["rm_scores"][:4], before[:4])


@pytest.fixture(scope="module")
def semi_supervised_file(base_testbed, tmp_path_factory):
    from devenus.records import hide_labels, read_records, write_records

    rows = hide_labels(read_records(base_testbed.split("train"))[:64], labeled_fraction=0.25, seed=0)
    return str(write_records(rows, tmp_path_factory.mktemp("semi") / "semi.parquet"))


SIGNALS = ("self_certainty", "neg_entropy", "seq_logprob", "agreement", "self_verification")


@pytest.mark.slow
@pytest.mark.extended
def test_two_steps_through_devenus_train(base_testbed, semi_supervised_file, tmp_path):
    cfg = RunConfig(method="unsupervised", steps=2, prompts_per_step=4, rollouts_per_prompt=4,
                    train_file=semi_supervised_file,
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    weights = ["+devenus.method_config.w_self_certainty=1", "+devenus.method_config.w_entropy=0.5",
               "+devenus.method_config.w_seq_prob=0.25", "+devenus.method_config.w_agreement=1",
               "+devenus.method_config.w_self_verification=1", "+devenus.method_config.seq_prob=mean"]
    r = train(base_testbed, tmp_path, cfg, *weights, env_extra=PLUGIN_ENV)
    assert r.ok, r.tail(60)
    steps = train_steps(r)
    assert set(steps) == {1, 2}
    for s, m in sorted(steps.items()):  # shown with -s
        print(s, {k: v for k, v in m.items() if k.startswith("devenus/unsupervised/") or k in (
            "actor/grad_norm", "timing_s/old_log_prob", "devenus/timing_s/hooks", "devenus/reward/unlabeled/mean",
            "devenus/reward/labeled/mean")})
    for s, m in steps.items():
        assert math.isfinite(m["actor/grad_norm"]), (s, m["actor/grad_norm"])
        if "devenus/reward/unlabeled/rows" not in m:
            continue  # a step whose prompts all happen to be labeled constructs nothing
        p = "devenus/unsupervised/"
        for key in [f"{k}/mean" for k in SIGNALS] + ["reward/mean", "reward/std", "scored_rows", "collapse_warning"]:
            assert p + key in m, (s, key, sorted(k for k in m if k.startswith("devenus/")))
        for k in SIGNALS[:3]:
            assert math.isfinite(m[f"{p}{k}/mean"])
        assert m[p + "self_certainty/mean"] >= 0 and m[p + "neg_entropy/mean"] <= 0
        assert 0 <= m[p + "agreement/mean"] <= 1
        assert 0 < m[p + "self_verification/mean"] < 1  # P(yes) from the actor's verdict pass
        assert m["devenus/self_verification/candidates"] >= 1
        # the combined reward is what the update saw (no KL in the reward here)
        assert m["devenus/reward/unlabeled/mean"] == pytest.approx(m[p + "reward/mean"], abs=1e-4)
    assert any("devenus/unsupervised/reward/mean" in m for m in steps.values())
