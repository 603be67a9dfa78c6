"""The four surfaces on hand-built DataProtos (no Ray, no model)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
from verl import DataProto  # noqa: E402

from devenus.adapters.verl import surfaces as S  # noqa: E402
from devenus.adapters.verl.trainer import DeVenusTrainer  # noqa: E402
from devenus.online.step import StepRules
from devenus.online.method import OnlineMethod  # noqa: E402


def make_batch(lengths, labeled, targets, answers, uids):
    """Rows whose responses are the characters of '\\boxed{answer}', right-padded with 0."""
    n, width = len(lengths), 16
    responses = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.long)
    for i, (L, a) in enumerate(zip(lengths, answers)):
        text = ("\\boxed{" + a + "}")[:L] if a is not None else "x" * L
        ids = [ord(c) for c in text][:L]
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = 1
    rm = torch.zeros(n, width)
    for i in range(n):
        if mask[i].any():
            rm[i, int(mask[i].nonzero().max())] = float(answers[i] == targets[i] and targets[i] != "")
    tensors = {"responses": responses, "response_mask": mask, "rm_scores": rm,
               "row_id": torch.arange(n)}
    non_tensors = {
        "uid": np.array(uids, dtype=object),
        "extra_info": np.array([{"index": f"k{u}", "labeled": lab} for u, lab in zip(uids, labeled)], dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": t} for t in targets], dtype=object),
        "tag": np.array([f"row{i}" for i in range(n)], dtype=object),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


class CharTokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i)


def test_aligned_selection_keeps_every_field_row_aligned():
    b = make_batch([5, 9, 0, 12, 3], [True] * 5, ["1"] * 5, ["1"] * 5, ["a", "a", "b", "b", "c"])
    for sel in (np.array([True, False, True, False, True]), np.array([4, 0, 3])):
        out = S.select_rows(b, sel)
        for i in range(len(out)):
            rid = int(out.batch["row_id"][i])
            assert out.non_tensor_batch["tag"][i] == f"row{rid}"
            assert torch.equal(out.batch["responses"][i], b.batch["responses"][rid])
            assert out.non_tensor_batch["extra_info"][i] is b.non_tensor_batch["extra_info"][rid]
    with pytest.raises(ValueError, match="rows"):
        S.select_rows(b, np.array([True, False]))


def test_sequence_scores_land_at_last_valid_token_for_ragged_rows():
    b = make_batch([5, 9, 0, 16], [True] * 4, ["1"] * 4, ["1", "1", "1", None], ["a", "a", "b", "b"])
    rm = torch.full((4, 16), 7.0)
    S.place_sequence_scores(rm, b.batch["response_mask"], [0.1, 0.2, 0.3, 0.4], rows=np.array([True, True, True, False]))
    assert rm[0, 4] == pytest.approx(0.1) and rm[0].sum() == pytest.approx(0.1)
    assert rm[1, 8] == pytest.approx(0.2) and rm[1].sum() == pytest.approx(0.2)
    assert rm[2].sum() == 0  # no valid token: nothing placed
    assert torch.all(rm[3] == 7.0)  # row not selected: untouched
    assert S.last_valid_index(b.batch["response_mask"]).tolist() == [4, 8, -1, 15]


def test_reweighting_scales_only_intended_rows_and_admission_zeroes_dropped():
    b = make_batch([4, 4, 4, 4], [True] * 4, ["1"] * 4, ["1"] * 4, ["a", "a", "b", "b"])
    b.batch["advantages"] = torch.ones(4, 16)
    S.scale_advantages(b, np.array([1.0, 1.0, 0.5, 0.0]))
    assert b.batch["advantages"][:, 0].tolist() == [1.0, 1.0, 0.5, 0.0]
    for bad in ([1, 1],):  # weights outside [0, 1] are refused by the step rules (tests/online/test_step.py)
        with pytest.raises(ValueError):
            S.scale_advantages(b, np.array(bad))
    before = b.batch["response_mask"].clone()
    assert S.apply_admission(b, np.array([True, True, False, False])) == 2
    assert torch.equal(b.batch["response_mask"][:2], before[:2])
    assert b.batch["response_mask"][2:].sum() == 0 and b.batch["advantages"][2:].abs().sum() == 0


class MajorityEverywhere(OnlineMethod):
    """Proposes the same target for every row, labeled ones included: the adapter must protect labels."""

    name = "test_majority"

    def construct_targets(self, batch):
        return np.array(["7"] * len(batch), dtype=object)


def bare_trainer(method):
    t = DeVenusTrainer.__new__(DeVenusTrainer)
    t.method, t.rules, t.tokenizer, t.global_steps, t._hook_s = method, StepRules(method), CharTokenizer(), 3, 0.0
    return t


def test_target_substitution_leaves_labeled_rows_alone():
    # group a: labeled, gold "1"; group b: unlabeled. All responses answer "7" except one.
    prompts = make_batch([10] * 4, [True, True, False, False], ["1", "1", "", ""], ["7", "1", "7", "3"], ["a", "a", "b", "b"])
    outputs = DataProto.from_dict(tensors={k: prompts.batch[k].clone() for k in ("responses", "response_mask", "rm_scores")})
    labeled_before = outputs.batch["rm_scores"][:2].clone()
    t = bare_trainer(MajorityEverywhere())
    out = t.on_rollouts(prompts, outputs)
    assert torch.equal(out.batch["rm_scores"][:2], labeled_before)  # verified reward kept
    assert out.batch["rm_scores"][2].sum() == 1.0 and out.batch["rm_scores"][3].sum() == 0.0
    assert list(out.non_tensor_batch[S.TARGET_KEY]) == ["1", "1", "7", "7"]
    assert t.rules.metrics["devenus/target/labeled_protected"] == 2
    assert prompts.non_tensor_batch["reward_model"][0]["ground_truth"] == "1"  # inputs never mutated


def test_validation_batches_pass_through_unchanged():
    prompts = make_batch([10] * 2, [False, False], ["", ""], ["7", "7"], ["a", "a"])
    prompts.meta_info["validate"] = True
    outputs = DataProto.from_dict(tensors={k: prompts.batch[k].clone() for k in ("responses", "response_mask", "rm_scores")})
    snapshot = outputs.batch["rm_scores"].clone()
    t = bare_trainer(MajorityEverywhere())
    t.async_rollout_manager = SimpleNamespace(generate_sequences=lambda p: outputs)
    # install the wrapper exactly as init_workers does, without starting workers
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    orig = RayPPOTrainer.init_workers
    try:
        RayPPOTrainer.init_workers = lambda self: None
        t.init_workers()
    finally:
        RayPPOTrainer.init_workers = orig
    out = t.async_rollout_manager.generate_sequences(prompts)
    assert out is outputs and torch.equal(out.batch["rm_scores"], snapshot)
    assert S.TARGET_KEY not in out.non_tensor_batch
    prompts.meta_info["validate"] = False
    out = t.async_rollout_manager.generate_sequences(prompts)
    assert out.batch["rm_scores"].sum() == 2.0  # training batches are supervised


def test_methods_never_see_simulation_truth():
    """The view handed to every method carries nothing from the `simulation` column."""
    prompts = make_batch([10] * 4, [False] * 4, [""] * 4, ["7", "7", "3", "3"], ["a", "a", "b", "b"])
    prompts.non_tensor_batch["simulation"] = np.array(
        [{"hidden_answer": "SECRET-4242", "noise": "none"}] * 4, dtype=object)
    outputs = DataProto.from_dict(tensors={k: prompts.batch[k].clone() for k in ("responses", "response_mask", "rm_scores")})
    view = S.rollout_view(prompts, outputs, CharTokenizer(), step=1, decode=True)

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                yield from walk(k)
                yield from walk(v)
        elif isinstance(x, (list, tuple, np.ndarray)):
            for v in x:
                yield from walk(v)
        else:
            yield x

    values = [getattr(view, f) for f in view.__dataclass_fields__]
    assert not [v for v in walk(values) if isinstance(v, str) and ("SECRET-4242" in v or v == "simulation")]


def test_proposals_are_judged_against_simulation_truth_when_the_evidence_is_written():
    """TraPO v2's promotion proposals reach the mechanism metrics through the adapter's evidence path."""
    from devenus.online.refine.trapo2 import TraPO2

    t = bare_trainer(TraPO2())
    written = []
    t._evidence = SimpleNamespace(extend=written.extend, flush=lambda: None)  # the run's evidence table, in memory
    metrics = {}
    for answers in (["7", "7", "1", "2"], ["7", "7", "7", "2"], ["7"] * 4):  # "u" climbs to a promotion of 7
        prompts = make_batch([10] * 8, [False] * 8, [""] * 8, answers + ["5", "5", "5", "6"], ["u"] * 4 + ["w"] * 4)
        prompts.non_tensor_batch["simulation"] = np.array([{"hidden_answer": "7"}] * 4 + [{"hidden_answer": "9"}] * 4,
                                                          dtype=object)
        outputs = DataProto.from_dict(tensors={k: prompts.batch[k].clone() for k in ("responses", "response_mask", "rm_scores")})
        t.on_rollouts(prompts, outputs)
        metrics = {}
        t._write_evidence(metrics)
    assert [r["values"]["after"] for r in written if r["kind"] == "proposal"] == ["7"]
    assert {k: v for k, v in metrics.items() if k.startswith("devenus/mechanism/")} == {
        "devenus/mechanism/promotion/seen": 2, "devenus/mechanism/promotion/given": 1,
        "devenus/mechanism/promotion/right": 1, "devenus/mechanism/promotion/precision": 1.0,
        "devenus/mechanism/promotion/recall": 0.5}
