"""Refill within verl's memory protocol: the sleep/wake order of a refill step, recorded.

verl 0.9.1's step (``RayPPOTrainer.fit``): replicas awake (``update_weights``, verl's wake and weight sync)
-> ``generate_sequences`` -> ``sleep_replicas`` -> ``_compute_old_log_prob``: no log-prob pass ever runs
beside awake replicas. The CPU backend's rollout server frees nothing when it sleeps (its ``sleep`` and
``wake_up`` are no-ops), so a run on the testbed cannot show memory; the order is recorded here instead, on
a bare ``DeVenusTrainer`` (no Ray, no model) whose real seam (``_compute_old_log_prob`` -> ``Composer`` ->
verl's own ``RayPPOTrainer._compute_old_log_prob`` and ``_get_gen_batch``, the wrapped generate, the
method's late surfaces) runs between recording stand-ins for the three things verl calls: the checkpoint
manager (``update_weights`` / ``sleep_replicas``), the rollout manager's ``generate_sequences`` and the
actor worker group's ``compute_log_prob``. The extended e2e run (test_sampling_e2e.py) records the same
calls through verl on the testbed."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

pytest.importorskip("verl")
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_response_mask  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402

from devenus.adapters.verl.trainer import DeVenusTrainer  # noqa: E402
from devenus.online.registry import WeakTrainerInterface  # noqa: E402
from devenus.online.sampling.dynamic_sampling import DynamicSamplingConfig  # noqa: E402
from devenus.online.step import StepRules  # noqa: E402

P, R, N, PROMPTS, ROWS = 3, 4, 4, 4, 16
#: verl's calls, as the recorder names them
VERL_CALLS = {"self.checkpoint_manager.update_weights(": "wake", "self.async_rollout_manager.generate_sequences(": "generate",
              "self.checkpoint_manager.sleep_replicas()": "sleep", "self._compute_old_log_prob(batch)": "log_prob"}


def verl_step_order() -> list[str]:
    """The order of verl's own calls in one step of ``RayPPOTrainer.fit`` (its source: the wake before the
    loop, then the step's first generate, sleep and log-prob pass)."""
    src = inspect.getsource(RayPPOTrainer.fit)
    at, pos = {}, 0
    for literal, name in VERL_CALLS.items():  # each after the previous one
        pos = src.index(literal, pos)
        at[name] = pos
    return sorted(at, key=at.get)


class Protocol:
    """The colocated replicas' state and every call verl's objects receive, in order, as (call, awake)."""

    def __init__(self):
        self.awake, self.calls = False, []

    def record(self, name):
        self.calls.append((name, self.awake))

    def update_weights(self, global_steps=None):  # CheckpointEngineManager: resumes memory, syncs weights
        self.record("wake")
        self.awake = True

    def sleep_replicas(self):
        self.record("sleep")
        self.awake = False


def informative(key: str) -> bool:
    return int(key[1:]) % 4 == 0  # k0, k4, k8, k12: their rollouts differ; every other prompt's are equal


class Rollout:
    """The rollout manager's generate: rollout j of an informative prompt answers token 3 + j, others token 3
    throughout; rm_scores = 1 at the last token of an informative prompt's odd rollouts."""

    def __init__(self, protocol, fail_at=None):
        self.protocol, self.fail_at, self.n = protocol, fail_at, 0

    def __call__(self, gen: DataProto) -> DataProto:
        self.protocol.record("generate")
        self.n += 1
        if self.n == self.fail_at:
            raise RuntimeError("generation failed")
        keys = [e["index"] for e in gen.non_tensor_batch["extra_info"]]
        b = len(keys)
        j = np.zeros(b, int)
        for i in range(1, b):
            j[i] = j[i - 1] + 1 if gen.non_tensor_batch["uid"][i] == gen.non_tensor_batch["uid"][i - 1] else 0
        prompts = torch.full((b, P), 7)
        responses = torch.tensor([[3 + (j[i] if informative(k) else 0)] * R for i, k in enumerate(keys)])
        rm = torch.zeros(b, R)
        rm[:, -1] = torch.tensor([float(informative(k) and j[i] % 2 == 1) for i, k in enumerate(keys)])
        am = torch.ones(b, P + R, dtype=torch.long)
        out = DataProto.from_dict(tensors={"prompts": prompts, "responses": responses, "rm_scores": rm,
                                           "input_ids": torch.cat([prompts, responses], 1), "attention_mask": am,
                                           "position_ids": torch.arange(P + R).expand(b, -1).clone()})
        out.meta_info["timing"] = {}
        return out


class ActorGroup:
    """The actor worker group's log-prob pass: entropy 0.1 x the input token (a row's responses decide it)."""

    def __init__(self, protocol):
        self.protocol = protocol

    def compute_log_prob(self, td):
        self.protocol.record("log_prob")
        e = td["input_ids"].to(torch.float32) * 0.1
        return tu.get_tensordict({"entropy": e, "log_probs": -e}, {"metrics": {"mfu": 0.0}})


class Dataset:
    def __init__(self):
        self.rows = [{"raw_prompt": [{"role": "user", "content": f"q{i}"}], "data_source": "t",
                      "extra_info": {"index": f"k{i}", "labeled": False}, "reward_model": {"ground_truth": ""}}
                     for i in range(ROWS)]
        self.dataframe = pd.DataFrame({k: [r[k] for r in self.rows] for k in ("extra_info", "reward_model")})

    def __getitem__(self, i):
        return {**self.rows[i], "dummy_tensor": torch.tensor([0], dtype=torch.uint8)}  # as RLHFDataset's rows


class CharTokenizer:
    eos_token_id = None

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(65 + i % 26) for i in ids)


def trainer(method_name: str, protocol: Protocol, monkeypatch, fail_at=None) -> DeVenusTrainer:
    method = WeakTrainerInterface.get(method_name).build({})
    t = DeVenusTrainer.__new__(DeVenusTrainer)
    t.method, t.rules, t.tokenizer, t.global_steps, t._hook_s = method, StepRules(method), CharTokenizer(), 1, 0.0
    t.config = OmegaConf.create({
        "data": {"train_batch_size": PROMPTS},
        "actor_rollout_ref": {"actor": {"calculate_sum_pi_squared": False},
                              "rollout": {"n": N, "temperature": 1.0, "agent": {"num_workers": 1}}}})
    t.sampling_config = DynamicSamplingConfig(enabled=True, max_refill_rounds=3)
    t.train_dataset, t.checkpoint_manager, t.actor_rollout_wg = Dataset(), protocol, ActorGroup(protocol)
    t.async_rollout_manager = SimpleNamespace(generate_sequences=Rollout(protocol, fail_at))
    monkeypatch.setattr(RayPPOTrainer, "init_workers", lambda self: None)
    t.init_workers()  # DeVenusTrainer wraps generate as it does in a run; verl starts no workers
    return t


def fit_step(t: DeVenusTrainer, protocol: Protocol):
    """fit()'s calls up to the seam, in fit()'s order: wake, the step's generation, sleep, the seam."""
    raw = DataProto.from_single_dict(collate_fn([t.train_dataset[i] for i in range(PROMPTS)]))
    raw.non_tensor_batch["uid"] = np.array([f"u{i}" for i in range(PROMPTS)], dtype=object)
    gen = t._get_gen_batch(raw).repeat(repeat_times=N, interleave=True)
    t.checkpoint_manager.update_weights(t.global_steps)
    out = t.async_rollout_manager.generate_sequences(gen)
    t.checkpoint_manager.sleep_replicas()
    out.meta_info.pop("timing")
    batch = raw.repeat(repeat_times=N, interleave=True).union(out)
    batch.batch["response_mask"] = compute_response_mask(batch)
    batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
    seam_from = len(protocol.calls)
    old, _ = t._compute_old_log_prob(batch)
    return batch, old, protocol.calls[seam_from:]


def test_verl_runs_its_log_prob_pass_with_the_replicas_asleep():
    # what the seam must match, read from verl's own fit(): wake, generate, sleep, log-prob pass
    assert verl_step_order() == ["wake", "generate", "sleep", "log_prob"]


@pytest.mark.parametrize("method", ["emrl", "grpo"])
def test_no_log_prob_pass_runs_beside_awake_replicas_and_each_wake_is_counted(method, monkeypatch):
    protocol = Protocol()
    t = trainer(method, protocol, monkeypatch)
    batch, old, seam = fit_step(t, protocol)
    m = t.rules.metrics
    rounds = int(m["devenus/sampling/refill_rounds"])
    assert rounds >= 2, "the fixture's prompts should need more than one round (late placement: whole batches)"
    # never a generation asleep, never a log-prob pass awake; the seam leaves the replicas asleep, as fit() expects
    assert all(awake for c, awake in protocol.calls if c == "generate")
    assert not any(awake for c, awake in protocol.calls if c == "log_prob")
    assert not protocol.awake
    calls = [c for c, _ in seam]
    if t.rules.after_log_prob:  # EMRL: the step's pass, then each round as verl's step: wake, generate, sleep, pass
        assert calls == ["log_prob"] + verl_step_order() * rounds
        assert m["devenus/sampling/extra_weight_syncs"] == rounds
    else:  # GRPO: one wake for every round, one sleep, then the step's one pass on the composed batch
        assert calls == ["wake"] + ["generate"] * rounds + ["sleep", "log_prob"]
        assert m["devenus/sampling/extra_weight_syncs"] == 1
    assert m["devenus/sampling/extra_weight_syncs"] == calls.count("wake")
    # the refill did its job: informative groups fill the empty slots (rows of old_log_prob replaced alike)
    assert m["devenus/sampling/groups_kept"] > PROMPTS - m["devenus/sampling/groups_zero_variance"]
    assert old.batch["entropys"].shape == batch.batch["responses"].shape


def test_a_failed_refill_generation_leaves_the_replicas_asleep(monkeypatch):
    protocol = Protocol()
    t = trainer("emrl", protocol, monkeypatch, fail_at=3)  # 3rd generate: the second refill round
    with pytest.raises(RuntimeError, match="generation failed"):
        fit_step(t, protocol)
    assert protocol.calls[-2:] == [("generate", True), ("sleep", True)] and not protocol.awake


def test_a_step_without_empty_slots_never_wakes_the_replicas(monkeypatch):
    protocol = Protocol()
    t = trainer("emrl", protocol, monkeypatch)
    t.sampling_config = DynamicSamplingConfig(enabled=True, max_refill_rounds=0)
    _, _, seam = fit_step(t, protocol)
    assert [c for c, _ in seam] == ["log_prob"] and t.rules.metrics["devenus/sampling/extra_weight_syncs"] == 0
