"""S_y's outcome (``constructed``) reaches surfaces placed after the actor's log-prob pass: the adapter
carries it as a non-tensor column through verl's batch (bare trainer, no Ray)."""

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
from verl import DataProto  # noqa: E402

from devenus.adapters.verl import surfaces as S  # noqa: E402
from devenus.online.method import OnlineMethod  # noqa: E402
from test_surfaces import bare_trainer, make_batch  # noqa: E402


class LateAdmit(OnlineMethod):
    """Gives unlabeled group "b" the target "3"; admits labeled groups and what S_y gave a target, after
    the log-prob pass (``token_stats``)."""

    name = "test_late_admit"
    step_needs = frozenset({"token_stats"})
    mechanism_metrics = frozenset({"admission"})

    def construct_targets(self, b):
        return np.array(["3" if u == "b" else None for u in b.uid], dtype=object)

    def admit(self, b):
        return np.asarray(b.labeled, bool) | b.constructed


def test_constructed_travels_to_the_late_surfaces():
    prompts = make_batch([10] * 6, [True] * 2 + [False] * 4, ["1"] * 2 + [""] * 4, ["1", "2", "3", "3", "4", "5"],
                         ["a", "a", "b", "b", "c", "c"])
    outputs = DataProto.from_dict(tensors={k: prompts.batch[k].clone() for k in ("responses", "response_mask", "rm_scores")})
    # simulation truth travels in its own column; the late placement judges admission against it
    prompts.non_tensor_batch["simulation"] = np.array([{"hidden_answer": h} for h in "113344"], dtype=object)
    t = bare_trainer(LateAdmit())
    assert t.rules.after_log_prob
    out = t.on_rollouts(prompts, outputs)
    assert list(out.non_tensor_batch[S.CONSTRUCTED_KEY]) == [False, False, True, True, False, False]
    assert S.ADMIT_KEY not in out.non_tensor_batch  # S_b waits for the log-prob pass
    # verl's _get_gen_batch pops every non-tensor column but data_source/reward_model/extra_info/uid into the
    # generation batch: `simulation` never comes back, the truth travels in the adapter's own column
    assert list(out.non_tensor_batch[S.HIDDEN_KEY]) == list("113344")
    nt = {k: prompts.non_tensor_batch[k] for k in ("uid", "extra_info", "reward_model")}
    batch = DataProto.from_dict(tensors={k: out.batch[k] for k in ("responses", "response_mask", "rm_scores")},
                                non_tensors={**nt, **out.non_tensor_batch})
    batch.reorder(torch.tensor([5, 2, 0, 4, 3, 1]))  # verl balances rows between the two passes
    entropy = torch.rand(6, 16, generator=torch.Generator().manual_seed(0))
    t._late_surfaces(batch, DataProto.from_dict(tensors={"old_log_probs": -entropy, "entropys": entropy}))
    assert list(batch.non_tensor_batch[S.ADMIT_KEY]) == [False, True, True, False, True, True]
    # b (target 3, truth 3) admitted; c (answers 4 and 5: no pseudo label) rejected
    assert t.rules.mechanism.pop() == {f"devenus/mechanism/admission/{k}": v for k, v in (
        ("admitted", 1), ("rejected", 1), ("admitted_labeled", 1), ("admitted_right", 1), ("rejected_labeled", 0),
        ("rejected_right", 0), ("admitted_precision", 1.0))}
