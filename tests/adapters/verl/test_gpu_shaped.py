"""The GPU recipes' batching on the CPU backend (docs/gpu.md, "GPU-shaped run on the CPU").

Unit part: what makes ``use_remove_padding=True`` correct without flash-attn. End-to-end part (extended):
``python -m devenus.train`` with two FSDP ranks, dynamic batch sizes, remove-padding, gradient checkpointing,
two agent-loop workers and two dataloader workers, once per surface (a target method, self-certainty
rewards, a hidden-state filter).
"""

from __future__ import annotations

import math
import re

import pytest
import torch


def test_packed_rows_attend_only_within_themselves_with_eager_attention(verl_cpu_fx):
    """verl's remove-padding forward packs a micro-batch's rows into one sequence (``attention_mask=None``,
    position ids restarting at 0 per row, ``use_cache=False``: ``transformer_impl.py``); flash-attn's varlen kernel keeps the
    rows apart on GPUs. On a CPU (eager attention) transformers builds the same block-diagonal causal mask
    from the restarting position ids (``masking_utils.find_packed_sequence_indices``), so every packed
    row's logits equal its own padded forward's."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(verl_cpu_fx["model"], attn_implementation="eager").eval()
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(5, model.config.vocab_size, (n,), generator=g) for n in (5, 9, 3)]
    with torch.no_grad():
        alone = [model(input_ids=r[None]).logits[0] for r in rows]
        ids = torch.cat(rows)[None]
        restart = torch.cat([torch.arange(len(r)) for r in rows])[None]
        # use_cache=False as verl passes it: with a cache transformers takes the input for decoding and
        # never looks for packed rows (the mask is then plain causal over the whole packed sequence)
        packed = model(input_ids=ids, attention_mask=None, position_ids=restart, use_cache=False).logits[0]
        cached = model(input_ids=ids, attention_mask=None, position_ids=restart, use_cache=True).logits[0]
    torch.testing.assert_close(packed, torch.cat(alone), rtol=1e-5, atol=1e-5)
    # the control: the same call with a cache lets later rows attend to the rows before them
    torch.testing.assert_close(cached[:len(rows[0])], alone[0], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(cached[len(rows[0]):], torch.cat(alone[1:]), atol=1e-3)


# ------------------------------------------------------------------------------------------- end to end
#: the GPU recipes' batching (src/devenus/recipes/gpu/common.yaml plus verl's defaults for agent-loop and
#: dataloader workers), at the testbed's size: token budgets that split a rank's rows into several
#: micro-batches (8 rows of up to 160 tokens per rank against 384 tokens)
GPU_SHAPED = (
    "trainer.n_gpus_per_node=2",
    "actor_rollout_ref.model.use_remove_padding=True",
    "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=384",
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=384",
    "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=384",
    "actor_rollout_ref.rollout.agent.num_workers=2",
    "data.dataloader_num_workers=2",
)

#: one method per surface: method -> (its own metric, method config overrides)
SURFACES = {
    "ttrl": ("devenus/ttrl/majority_ratio", []),  # S_y: targets from the rollouts' majority vote
    "intuitor": ("devenus/intuitor/self_certainty/mean", []),  # S_r: self-certainty rewards (token stats)
    # S_b: a filter on pooled hidden states; loosened so that it fits on 16 rollouts a step
    "geomin": ("devenus/geomin/layers_total", ["+devenus.method_config.min_per_class=2",
                                               "+devenus.method_config.min_mixture_points=2",
                                               "+devenus.method_config.top_layers=2"]),
}


@pytest.fixture(scope="module")
def semi_file(base_testbed, tmp_path_factory):
    """16 rows of the testbed's train split, half the labels hidden: every method has unlabeled rows to
    work on, and GeoMin labeled ones to fit on."""
    from devenus.records import hide_labels, read_records, write_records

    rows = hide_labels(read_records(base_testbed.split("train"))[:16], labeled_fraction=0.5, seed=0)
    return str(write_records(rows, tmp_path_factory.mktemp("gpu_shaped") / "semi.parquet"))


@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.parametrize("method", sorted(SURFACES))
def test_gpu_shaped_run_on_the_cpu(method, base_testbed, semi_file, tmp_path):
    from devenus.runs.testbed import RunConfig
    from e2e import train, train_steps

    metric, keys = SURFACES[method]
    cfg = RunConfig(method=method, steps=2, prompts_per_step=4, rollouts_per_prompt=4, kl_coef=0.001,
                    train_file=semi_file, val_before_train=False, extra_overrides=("trainer.test_freq=-1",))
    r = train(base_testbed, tmp_path, cfg, *GPU_SHAPED, *keys)
    assert r.ok, r.tail(80)
    steps = train_steps(r)
    assert sorted(steps) == [1, 2]
    for s, m in steps.items():
        for key in ("actor/grad_norm", "actor/pg_loss", "actor/kl_loss", "critic/score/mean"):
            assert math.isfinite(m[key]), (s, key, m.get(key))
        assert m["actor/grad_norm"] > 0, s  # the update ran through the checkpointed, packed forward
    assert any(metric in m for m in steps.values()), sorted(k for m in steps.values() for k in m if "devenus/" in k)
    assert all(math.isfinite(m[metric]) for m in steps.values() if metric in m)
    if method == "geomin":  # pooled from packed rows: embeddings, the first 3 of 4 layers, the final norm
        assert all(m[metric] == 5 for m in steps.values())
    # both ranks took part: each rank's rollout replica received the weights after every update
    log = (tmp_path / "train.log").read_text()
    replicas = set(re.findall(r"\[devenus-hf-rollout\] update_weights replica=(\d+)", log))
    assert replicas == {"0", "1"}, replicas
