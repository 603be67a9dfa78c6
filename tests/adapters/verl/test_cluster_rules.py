"""The rules verl checks only after Ray starts, decided from the composed config at cluster shapes
(8 GPUs on one node; 2 nodes of 8). The launch-host decisions (backend, attention, paths, worker environment)
are tested in test_cluster_launch.py."""

import pytest

pytest.importorskip("verl")

from hydra import compose, initialize_config_module  # noqa: E402

from devenus.adapters.verl.cluster_rules import cluster_errors  # noqa: E402

EIGHT = ["trainer.n_gpus_per_node=8", "trainer.nnodes=1"]
TWO_NODES = ["trainer.n_gpus_per_node=8", "trainer.nnodes=2"]
DYNAMIC = ["actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
           "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True"]


def _config(*overrides):
    with initialize_config_module(config_module="devenus.configs", version_base=None):
        return compose("devenus_trainer", overrides=list(overrides))


@pytest.mark.parametrize("shape", [EIGHT, TWO_NODES])
def test_a_recipe_shaped_config_passes_at_cluster_shape(shape):
    cfg = _config(*shape, *DYNAMIC, "data.train_batch_size=128", "actor_rollout_ref.rollout.n=8",
                  "actor_rollout_ref.actor.ppo_mini_batch_size=128")
    assert cluster_errors(cfg, use_reference_policy=True) == []


def test_rows_not_dividing_eight_gpus_fail():
    cfg = _config(*EIGHT, *DYNAMIC, "data.train_batch_size=3", "actor_rollout_ref.rollout.n=31",
                  "actor_rollout_ref.actor.ppo_mini_batch_size=3")
    errors = cluster_errors(cfg, use_reference_policy=True)
    assert any("3 * 31 = 93 rows do not divide into the 8 data-parallel ranks" in e for e in errors), errors
    assert all("\n" not in e for e in errors)


def test_two_nodes_need_rows_divisible_by_sixteen():
    # 8 prompts x 5 = 40 rows: divides 8 GPUs but not the 16 of two nodes
    ok = _config(*EIGHT, *DYNAMIC, "data.train_batch_size=8", "actor_rollout_ref.rollout.n=5",
                 "actor_rollout_ref.actor.ppo_mini_batch_size=8")
    bad = _config(*TWO_NODES, *DYNAMIC, "data.train_batch_size=8", "actor_rollout_ref.rollout.n=5",
                  "actor_rollout_ref.actor.ppo_mini_batch_size=8")
    assert cluster_errors(ok, use_reference_policy=True) == []
    errors = cluster_errors(bad, use_reference_policy=True)
    assert any("40 rows do not divide into the 16 data-parallel ranks of 2 node(s)" in e for e in errors), errors


def test_sequence_parallel_shrinks_the_data_parallel_size():
    # 4 x 3 = 12 rows: not 8 ranks, but 4 with Ulysses sp=2
    base = [*EIGHT, *DYNAMIC, "data.train_batch_size=4", "actor_rollout_ref.rollout.n=3",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4"]
    assert cluster_errors(_config(*base), use_reference_policy=False)
    assert cluster_errors(_config(*base, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"),
                          use_reference_policy=False) == []


def test_mini_batch_must_divide_into_the_ranks():
    cfg = _config(*EIGHT, *DYNAMIC, "data.train_batch_size=16", "actor_rollout_ref.rollout.n=1",
                  "actor_rollout_ref.actor.ppo_mini_batch_size=4")
    errors = cluster_errors(cfg, use_reference_policy=True)
    assert [e for e in errors if e.startswith("actor_rollout_ref.actor.ppo_mini_batch_size * rollout.n = 4 * 1")]


def test_actor_and_rollout_dynamic_batching_must_agree():
    cfg = _config(*EIGHT, *DYNAMIC, "actor_rollout_ref.actor.use_dynamic_bsz=False",
                  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "data.train_batch_size=64",
                  "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.actor.ppo_mini_batch_size=64")
    errors = cluster_errors(cfg, use_reference_policy=True)
    assert errors == ["actor_rollout_ref.actor.use_dynamic_bsz=False but "
                      "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True: verl's actor worker requires them equal"]


def test_static_batching_needs_micro_batches_that_split_the_rows():
    static = ["actor_rollout_ref.actor.use_dynamic_bsz=False", "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False",
              "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=False", "data.train_batch_size=64",
              "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.actor.ppo_mini_batch_size=64"]
    micro = ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8"]
    assert cluster_errors(_config(*EIGHT, *static, *micro, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"),
                          use_reference_policy=True) == []
    # 64 x 8 / 8 = 64 rows per GPU; 48 does not split them
    errors = cluster_errors(_config(*EIGHT, *static, *micro, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=48"),
                            use_reference_policy=True)
    assert errors == ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=48 does not divide the 64 mini-batch "
                      "rows per GPU at 1 node(s) x 8 GPUs"]
    errors = cluster_errors(_config(*EIGHT, *static, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"),
                            use_reference_policy=True)
    assert [e.split(" needs ")[1] for e in errors] == ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                                                       "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"]
