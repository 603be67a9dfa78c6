"""Vote on N, train on M: the trainer's rollout wrapper on hand-built DataProtos (no Ray, no model)."""

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

pytest.importorskip("verl")
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402

from devenus.adapters.verl import surfaces as S  # noqa: E402
from devenus.adapters.verl import votes as V  # noqa: E402
from devenus.adapters.verl.trainer import DeVenusTrainer  # noqa: E402
from devenus.online.step import StepRules
from devenus.online.registry import WeakTrainerInterface  # noqa: E402

WIDTH = 16


class CharTokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i)


def prompts_for(groups, m, labeled=None, gold=None, hidden=None):
    """verl's gen batch after repeat(m, interleave=True): one uid per prompt, groups contiguous."""
    rows = []
    for g in range(len(groups)):
        for _ in range(m):
            rows.append(g)
    nt = {
        "uid": np.array([f"u{g}" for g in rows], dtype=object),
        "extra_info": np.array([{"index": f"k{g}", "labeled": bool(labeled and labeled[g])} for g in rows], dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": (gold[g] if gold else "")} for g in rows], dtype=object),
        "raw_prompt": np.array([[{"role": "user", "content": f"q{g}"}] for g in rows], dtype=object),
    }
    if hidden:
        nt["simulation"] = np.array([{"hidden_answer": hidden[g], "noise": "none"} for g in rows], dtype=object)
    p = DataProto.from_dict(non_tensors=nt)
    p.meta_info["global_steps"] = 1
    return p


class FakeRollout:
    """Answers ``groups[g][j]`` for the j-th rollout of prompt g; records every call."""

    def __init__(self, groups):
        self.groups, self.calls, self.outputs = groups, [], []

    def __call__(self, prompts: DataProto) -> DataProto:
        self.calls.append(prompts)
        uid = prompts.non_tensor_batch["uid"]
        n = len(prompts)
        responses = torch.zeros(n, WIDTH, dtype=torch.long)
        mask = torch.zeros(n, WIDTH, dtype=torch.long)
        seen: dict = {}
        for i in range(n):  # the j-th row of a uid is its j-th rollout
            g = int(uid[i][1:])
            j = seen[g] = seen.get(g, -1) + 1
            a = self.groups[g][j]
            text = "\\boxed{" + a + "}" if a is not None else "no idea"
            ids = [ord(c) for c in text][:WIDTH]
            responses[i, : len(ids)] = torch.tensor(ids)
            mask[i, : len(ids)] = 1
        # verl's reward: 1 at the last valid token when the answer matches the row's target
        rm = torch.zeros(n, WIDTH)
        gold = [r["ground_truth"] for r in prompts.non_tensor_batch["reward_model"]]
        j_of = np.zeros(n, int)
        count: dict = {}
        for i in range(n):
            g = int(uid[i][1:])
            j_of[i] = count[g] = count.get(g, -1) + 1
            a = self.groups[g][j_of[i]]
            last = int(mask[i].nonzero().max())
            rm[i, last] = float(a is not None and gold[i] != "" and a == gold[i])
        out = DataProto.from_dict(tensors={"responses": responses, "response_mask": mask, "rm_scores": rm,
                                           "big_row": torch.arange(n), "rollout_j": torch.as_tensor(j_of)})
        out.meta_info["timing"] = {"agent_loop/generate_sequences/mean": 0.1}
        self.outputs.append(out)
        return out


def trainer_with(method_name, n, groups, **cfg):
    method = WeakTrainerInterface.get(method_name).build(cfg)
    t = DeVenusTrainer.__new__(DeVenusTrainer)
    t.method, t.rules, t.tokenizer, t.global_steps, t._hook_s = method, StepRules(method), CharTokenizer(), 1, 0.0
    t.config = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "n": n, "agent": {"default_agent_loop": "single_turn_agent", "agent_loop_config_path": None}}}})
    fake = FakeRollout(groups)
    t.async_rollout_manager = SimpleNamespace(generate_sequences=fake)
    orig = RayPPOTrainer.init_workers
    try:
        RayPPOTrainer.init_workers = lambda self: None  # install the wrapper as init_workers does, no workers
        t.init_workers()
    finally:
        RayPPOTrainer.init_workers = orig
    return t, fake


# prompt 0: the 2 training rollouts tie (1 vs 2), the 2 extra votes say 2 -> target 2
# prompt 1: training rollouts agree on 5, extra votes 6, 6 -> 2:2 tie over N -> no target
GROUPS = [["1", "2", "2", "2"], ["5", "5", "6", "6"], ["7", "8", None, "8"]]


def test_n_votes_m_train_rows_aligned_and_votes_decide():
    t, fake = trainer_with("ttrl", 2, GROUPS, votes=4)
    prompts = prompts_for(GROUPS, 2, hidden=["2", "5", "8"])
    out = t.async_rollout_manager.generate_sequences(prompts)
    assert len(fake.calls) == 1 and len(fake.calls[0]) == 3 * 4  # one call, N = 4 rollouts per prompt
    big = fake.calls[0]
    assert list(big.non_tensor_batch["uid"]) == [f"u{g}" for g in range(3) for _ in range(4)]
    assert V.TEMPERATURE_KEY not in big.non_tensor_batch and "agent_name" not in big.non_tensor_batch
    # verl sees M = 2 rows per prompt, in its own row order, and the first M rollouts of each group
    assert len(out) == len(prompts) == 6
    assert out.batch["big_row"].tolist() == [0, 1, 4, 5, 8, 9]
    assert out.batch["rollout_j"].tolist() == [0, 1] * 3
    for k in ("responses", "response_mask"):
        assert torch.equal(out.batch[k], fake.outputs[0].batch[k][[0, 1, 4, 5, 8, 9]])
    assert out.meta_info["timing"]  # verl reads the timing of the call
    assert list(out.non_tensor_batch[S.TARGET_KEY]) == ["2", "2", "", "", "8", "8"]
    assert out.batch["rm_scores"].sum(dim=1).tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    m = t.rules.metrics | {f"devenus/ttrl/{k}": v for k, v in t.method.pop_metrics().items()}
    assert m["devenus/votes/per_prompt"] == 4 and m["devenus/votes/extra_rows"] == 6
    assert m["devenus/ttrl/votes_per_group"] == 4 and m["devenus/ttrl/tie_share"] == pytest.approx(1 / 3)
    assert m["devenus/target/accuracy"] == 1.0  # pseudo labels (2, 8) vs hidden truth
    mech = t.rules.mechanism.pop()  # the same truth, through the adapter's path into the mechanism metrics
    assert mech["devenus/mechanism/pseudo_target/precision"] == 1.0
    assert mech["devenus/mechanism/pseudo_target/coverage"] == pytest.approx(2 / 3)


def test_without_extra_votes_the_wrapper_is_the_plain_path():
    t, fake = trainer_with("ttrl", 2, GROUPS)
    prompts = prompts_for(GROUPS, 2)
    out = t.async_rollout_manager.generate_sequences(prompts)
    assert fake.calls[0] is prompts and len(out) == 6
    assert list(out.non_tensor_batch[S.TARGET_KEY]) == ["", "", "5", "5", "", ""]  # 1:2 ... ties give nothing
    assert "devenus/votes/per_prompt" not in t.rules.metrics


def test_semi_supervised_labeled_rows_keep_gold_reward_and_target():
    groups = [["3", "4", "4", "4"], ["5", "5", "6", "5"]]
    t, fake = trainer_with("ttrl", 2, groups, votes=4)
    prompts = prompts_for(groups, 2, labeled=[True, False], gold=["3", ""])
    out = t.async_rollout_manager.generate_sequences(prompts)
    big = fake.outputs[0]
    assert out.batch["rm_scores"][:2].sum(dim=1).tolist() == [1.0, 0.0]  # verified reward vs gold 3, untouched
    assert torch.equal(out.batch["rm_scores"][:2], big.batch["rm_scores"][:2])
    assert list(out.non_tensor_batch[S.TARGET_KEY]) == ["3", "3", "5", "5"]
    assert out.batch["rm_scores"][2:].sum(dim=1).tolist() == [1.0, 1.0]
    assert t.rules.metrics["devenus/target/labeled_protected"] == 0


def test_vote_temperatures_route_extra_rows_through_the_temperature_agent_loop():
    t, fake = trainer_with("ttrl", 2, GROUPS, votes=4, vote_temperatures=[0.5])
    assert t.config.actor_rollout_ref.rollout.agent.agent_loop_config_path == V.agent_loops_yaml()
    out = t.async_rollout_manager.generate_sequences(prompts_for(GROUPS, 2))
    big = fake.calls[0].non_tensor_batch
    assert list(big["agent_name"][:4]) == ["single_turn_agent"] * 2 + [V.VOTE_AGENT] * 2
    temps = big[V.TEMPERATURE_KEY][:4]
    assert np.isnan(temps[:2]).all() and temps[2:].tolist() == [0.5, 0.5]
    assert V.TEMPERATURE_KEY not in out.non_tensor_batch and "agent_name" not in out.non_tensor_batch


def test_validation_is_never_expanded():
    t, fake = trainer_with("ttrl", 2, GROUPS, votes=4)
    p = prompts_for(GROUPS, 2)
    p.meta_info["validate"] = True
    out = t.async_rollout_manager.generate_sequences(p)
    assert fake.calls[0] is p and len(out) == 6 and S.TARGET_KEY not in out.non_tensor_batch


def test_layout_errors_are_named():
    p = prompts_for(GROUPS, 2)
    p.non_tensor_batch["uid"] = np.array(["u0", "u1", "u0", "u1", "u2", "u2"], dtype=object)
    with pytest.raises(ValueError, match="contiguous groups of rollout.n=2"):
        V.expand_for_votes(p, 2, [None])
    with pytest.raises(ValueError, match="expects 4 rollouts per prompt"):
        V.expand_for_votes(prompts_for(GROUPS, 2), 4, [None])


def test_user_agent_loop_config_must_carry_the_vote_agent(tmp_path):
    own = tmp_path / "loops.yaml"
    own.write_text("- name: mine\n  _target_: x.Y\n")
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"agent": {"agent_loop_config_path": str(own)}}}})
    with pytest.raises(ValueError, match="devenus_vote_temperature"):
        V.install_vote_agent_loop(cfg)
    own.write_text(own.read_text() + open(V.agent_loops_yaml()).read())
    V.install_vote_agent_loop(cfg)  # accepted, left as it is
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(own)


def test_temperature_agent_loop_overrides_only_its_rows(monkeypatch):
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    from devenus.adapters.verl.vote_agent_loop import TemperatureAgentLoop

    seen = []

    async def fake_run(self, sampling_params, **kwargs):
        seen.append((sampling_params, kwargs))
        return "ok"

    monkeypatch.setattr(SingleTurnAgentLoop, "run", fake_run)
    loop = TemperatureAgentLoop.__new__(TemperatureAgentLoop)
    base = {"temperature": 1.0, "top_p": 0.9, "top_k": 50}
    assert asyncio.run(loop.run(dict(base), raw_prompt=[], devenus_temperature=0.6)) == "ok"
    assert seen[-1][0]["temperature"] == 0.6 and seen[-1][0]["top_p"] == 0.9
    assert V.TEMPERATURE_KEY not in seen[-1][1]
    asyncio.run(loop.run(dict(base), raw_prompt=[], devenus_temperature=float("nan")))
    assert seen[-1][0] == base
    asyncio.run(loop.run(dict(base), raw_prompt=[], devenus_temperature=0.0))
    assert seen[-1][0] == {"temperature": 0.0, "top_p": 1.0, "top_k": -1}
