"""Probe for the self-certainty engine extension, run in a fresh process (it initialises torch.distributed).

``python tests/adapters/verl/token_stats_probe.py MODEL_DIR [--bench]`` prints one JSON line:

- which engine class verl's registry hands out for fsdp/fsdp2 (the plugin is loaded through
  ``VERL_USE_EXTERNAL_MODULES``, set by the caller);
- the max |difference| between the engine's per-token self-certainty / log-probs and a direct
  Hugging Face forward over the same sequences (full vocabulary, float64), with and without
  remove-padding, at temperature 0.7 and a 3-token chunk;
- the same through ``DeVenusTrainer._compute_old_log_prob`` (verl's own method, with the worker group
  replaced by an in-process shim over the engine) with the Intuitor method: the rewards written to
  ``rm_scores``, labeled rows untouched, the worker group restored afterwards;
- with ``--bench``: the log-prob pass's time with and without self-certainty.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time

os.environ.update({"VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda", "DEVENUS_VERL_CPU": "1",
                   "MASTER_ADDR": "127.0.0.1", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
os.environ.setdefault("MASTER_PORT", "29533")

import numpy as np  # noqa: E402
import torch  # noqa: E402

TEMPERATURE = 0.7


def build_engine(model_dir: str):
    from verl.trainer.config import CheckpointConfig
    from verl.workers.config import FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig
    from verl.workers.engine.base import EngineRegistry

    fp32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    mc = HFModelConfig(path=model_dir, use_remove_padding=True, override_config={"attn_implementation": "eager"})
    ec = FSDPEngineConfig(strategy="fsdp2", dtype="float32", mixed_precision=fp32, use_torch_compile=False,
                          forward_only=True)
    eng = EngineRegistry.new("language_model", "fsdp2", model_config=mc, engine_config=ec,
                             optimizer_config=FSDPOptimizerConfig(lr=1e-5), checkpoint_config=CheckpointConfig())
    eng.initialize()
    return eng


def make_batch(plens, rlens, P, R, vocab, labeled, seed=0):
    from verl import DataProto

    g = torch.Generator().manual_seed(seed)
    B = len(plens)
    prompts = torch.zeros(B, P, dtype=torch.long)
    responses = torch.zeros(B, R, dtype=torch.long)
    am = torch.zeros(B, P + R, dtype=torch.long)
    for i in range(B):
        prompts[i, P - plens[i]:] = torch.randint(3, vocab, (plens[i],), generator=g)
        responses[i, : rlens[i]] = torch.randint(3, vocab, (rlens[i],), generator=g)
        am[i, P - plens[i]: P + rlens[i]] = 1
    pos = (am.cumsum(1) - 1).clamp(min=0) * am
    rm = torch.zeros(B, R)
    for i in range(B):
        rm[i, rlens[i] - 1] = float(labeled[i] and i % 2 == 0)  # labeled rows: verified 1/0
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                 "attention_mask": am, "position_ids": pos, "response_mask": am[:, P:], "rm_scores": rm},
        non_tensors={
            "uid": np.array([f"u{i // 2}" for i in range(B)], dtype=object),
            "extra_info": np.array([{"index": f"k{i // 2}", "labeled": bool(lab)} for i, lab in enumerate(labeled)],
                                   dtype=object),
            "reward_model": np.array([{"ground_truth": "1" if lab else ""} for lab in labeled], dtype=object),
            "pred": np.array(["1"] * B, dtype=object),
        },
        meta_info={"temperature": TEMPERATURE},
    )


def hf_reference(model_dir, batch, P):
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32).eval()
    am, responses = batch.batch["attention_mask"], batch.batch["responses"]
    B, R = responses.shape
    sc, lp = torch.zeros(B, R, dtype=torch.float64), torch.zeros(B, R, dtype=torch.float64)
    with torch.no_grad():
        for i in range(B):
            pl, rl = int(am[i, :P].sum()), int(am[i, P:].sum())
            ids = batch.batch["input_ids"][i][am[i].bool()][None]
            z = hf(ids).logits[0, pl - 1: pl - 1 + rl].double() / TEMPERATURE
            logp = torch.log_softmax(z, -1)
            V = z.shape[-1]
            sc[i, :rl] = (1.0 / V * (math.log(1.0 / V) - logp)).sum(-1)  # KL(U || p), from the definition
            lp[i, :rl] = logp.gather(-1, responses[i, :rl, None])[:, 0]
    return sc, lp, hf.config.vocab_size


class EngineWorkerGroup:
    """In-process stand-in for the actor worker group: what TrainingWorker.infer_batch does, minus Ray."""

    def __init__(self, eng, use_remove_padding=True, micro=2):
        self.eng, self.rmpad, self.micro = eng, use_remove_padding, micro
        self.flags_seen = []

    def compute_log_prob(self, td):
        from verl.utils import tensordict_utils as tu

        tu.assign_non_tensor(td, use_remove_padding=self.rmpad, use_dynamic_bsz=False,
                             micro_batch_size_per_gpu=self.micro, use_fused_kernels=False)
        self.flags_seen.append(bool(tu.get_non_tensor_data(td, "calculate_self_certainty", False)))
        with self.eng.eval_mode():
            out = self.eng.infer_batch(td, loss_function=None)
        return tu.get_tensordict(tensor_dict=out["model_output"], non_tensor_dict={"metrics": {"mfu": 0.0}})


def engine_pass(eng, batch, rmpad, flag, chunk=3, micro=2):
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    td = left_right_2_no_padding(batch.to_tensordict())
    tu.assign_non_tensor(td, calculate_entropy=True, compute_loss=False)
    if flag:
        tu.assign_non_tensor(td, calculate_self_certainty=True, self_certainty_chunk_size=chunk)
    out = EngineWorkerGroup(eng, rmpad, micro).compute_log_prob(td)
    return {k: no_padding_2_padding(out[k], td) for k in out.keys() if k != "metrics"}


def bare_trainer(method, wg):
    from omegaconf import OmegaConf

    from devenus.adapters.verl.trainer import DeVenusTrainer

    from devenus.online.step import StepRules

    class Tok:
        def decode(self, ids, skip_special_tokens=True):
            return ""

    t = DeVenusTrainer.__new__(DeVenusTrainer)
    t.method, t.rules, t.tokenizer, t.global_steps, t._hook_s = method, StepRules(method), Tok(), 1, 0.0
    t.actor_rollout_wg = wg
    t.config = OmegaConf.create({"actor_rollout_ref": {"actor": {"calculate_sum_pi_squared": False}}})
    return t


def main(model_dir: str, bench: bool) -> dict:
    import verl  # noqa: F401  (loads the plugins named in VERL_USE_EXTERNAL_MODULES)
    from verl.workers.engine.base import EngineRegistry

    from devenus.online.supervise.intuitor import Intuitor, IntuitorConfig

    res: dict = {"engine": {b: EngineRegistry.get_engine_cls("language_model", b).__name__ for b in ("fsdp", "fsdp2")}}
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    eng = build_engine(model_dir)

    P, R = 8, 12
    labeled = [True, True, False, False, False, False]
    batch = make_batch([3, 8, 5, 8, 2, 6], [12, 1, 7, 4, 12, 9], P, R, vocab=340, labeled=labeled)
    ref_sc, ref_lp, vocab = hf_reference(model_dir, batch, P)
    res["vocab_width"] = vocab
    mask = batch.batch["response_mask"].bool()
    for rmpad in (True, False):
        out = engine_pass(eng, batch, rmpad, flag=True)
        res[f"rmpad={rmpad}"] = {
            "keys": sorted(out),
            "sc_max_abs_diff": float((out["self_certainty"].double() - ref_sc)[mask].abs().max()),
            "logp_max_abs_diff": float((out["log_probs"].double() - ref_lp)[mask].abs().max()),
            "keys_without_flag": sorted(engine_pass(eng, batch, rmpad, flag=False)),
        }

    # the trainer's own _compute_old_log_prob, Intuitor asking for self-certainty
    wg = EngineWorkerGroup(eng)
    t = bare_trainer(Intuitor(IntuitorConfig(chunk_size=5)), wg)
    before = batch.batch["rm_scores"].clone()
    old, _ = t._compute_old_log_prob(batch)
    want = [float(ref_sc[i][mask[i]].mean()) for i in range(len(labeled))]
    got = batch.batch["rm_scores"].sum(1).tolist()
    res["trainer"] = {
        "flags_seen": wg.flags_seen,
        "wrapper_removed": "compute_log_prob" not in vars(wg),
        "unlabeled_reward_max_abs_diff": max(abs(got[i] - want[i]) for i in range(6) if not labeled[i]),
        "labeled_unchanged": bool(torch.equal(batch.batch["rm_scores"][:2], before[:2])),
        "old_log_prob_keys": sorted(old.batch.keys()),
        "metrics": sorted(t.method.pop_metrics()),
    }
    # a method without self-certainty in `needs` never sets the flag
    from devenus.online.supervise.emrl import EMRL

    wg2 = EngineWorkerGroup(eng)
    bare_trainer(EMRL(), wg2)._compute_old_log_prob(make_batch([3, 8], [5, 5], P, R, 340, [False, False]))
    res["emrl_flags_seen"] = wg2.flags_seen

    if bench:
        B, P2, R2 = 32, 32, 96
        big = make_batch([P2] * B, [R2] * B, P2, R2, 340, [False] * B, seed=1)
        res["bench"] = {"rows": B, "tokens_per_row": P2 + R2, "vocab_width": vocab, "micro_batch": 16}
        for rmpad in (False, True):
            times: dict = {}
            for flag in (False, True) * 3:  # interleaved, so drift hits both arms alike
                for _ in range(3):
                    t0 = time.perf_counter()
                    engine_pass(eng, big, rmpad, flag, chunk=1024, micro=16)
                    times.setdefault(flag, []).append(time.perf_counter() - t0)
            res["bench"][f"rmpad={rmpad}"] = {"median_s_without": statistics.median(times[False]),
                                               "median_s_with": statistics.median(times[True])}
    torch.distributed.destroy_process_group()
    return res


if __name__ == "__main__":
    print("PROBE " + json.dumps(main(sys.argv[1], "--bench" in sys.argv)))
