"""The self-certainty engine extension and its trainer seam.

In-process tests use hand-built DataProtos; the engine itself runs in a fresh process
(``token_stats_probe.py``: it initialises torch.distributed and loads the plugin through
``VERL_USE_EXTERNAL_MODULES``, as Ray workers do).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("verl")
from verl import DataProto  # noqa: E402

from devenus.adapters.verl import surfaces as S  # noqa: E402
from devenus.adapters.verl import token_stats as TS  # noqa: E402
from devenus.online.supervise.emrl import EMRL  # noqa: E402
from devenus.online.supervise.intuitor import Intuitor  # noqa: E402
from test_surfaces import bare_trainer, make_batch  # noqa: E402

PROBE = Path(__file__).parent / "token_stats_probe.py"


def test_requested_stats_follow_needs():
    assert TS.requested_stats(Intuitor.step_needs) == ("self_certainty",)
    assert TS.requested_stats(EMRL.step_needs) == ()
    assert TS.requested_stats({"labels"}) == ()


def test_missing_plugin_fails_before_workers_start(monkeypatch):
    monkeypatch.setattr(TS, "_INSTALLED", False)
    TS.check_installed(())  # nothing needed: fine
    with pytest.raises(RuntimeError, match="VERL_USE_EXTERNAL_MODULES=devenus.adapters.verl.plugin"):
        TS.check_installed(("self_certainty",))


class FakeWorkerGroup:
    def __init__(self, output):
        self.output, self.calls = output, []

    def compute_log_prob(self, td, *a, **k):
        self.calls.append(td)
        return self.output


def test_collector_leaves_other_methods_untouched():
    wg = FakeWorkerGroup(output=None)
    bound = wg.compute_log_prob
    with TS.collect_extra_stats(wg, EMRL()) as extra:
        assert wg.compute_log_prob == bound and "compute_log_prob" not in vars(wg)
    assert extra == {}


def test_collector_names_the_plugin_when_the_engine_returns_nothing_and_restores_the_group():
    from tensordict import TensorDict

    wg = FakeWorkerGroup(output=TensorDict({}, batch_size=[]))
    td = TensorDict({}, batch_size=[])
    with pytest.raises(RuntimeError, match="engine extension is not loaded"):
        with TS.collect_extra_stats(wg, Intuitor()):
            wg.compute_log_prob(td)
    assert "compute_log_prob" not in vars(wg)  # the class's method again
    from verl.utils import tensordict_utils as tu

    assert tu.get_non_tensor_data(td, TS.FLAG, False) is True
    assert tu.get_non_tensor_data(td, TS.CHUNK_KEY, None) == Intuitor().config.chunk_size


def test_semi_supervised_labeled_rows_keep_verified_reward():
    """Intuitor on a mixed batch: labeled rows keep their 0/1 verified reward, unlabeled rows get mean SC."""
    batch = make_batch([10, 6, 8, 3], [True, True, False, False], ["1", "1", "", ""], ["1", "2", "7", "3"],
                       ["a", "a", "b", "b"])
    mask = batch.batch["response_mask"]
    g = torch.Generator().manual_seed(0)
    sc = torch.rand(mask.shape, generator=g) * 4
    sc[mask == 0] = 1e6  # padding must never leak into a score
    old = DataProto.from_dict(tensors={"old_log_probs": -torch.rand(mask.shape), "entropys": torch.rand(mask.shape)})
    before = batch.batch["rm_scores"].clone()
    t = bare_trainer(Intuitor())
    t._late_surfaces(batch, old, {"self_certainty": sc})
    rm = batch.batch["rm_scores"]
    assert torch.equal(rm[:2], before[:2]) and rm[0].sum() == 1.0 and rm[1].sum() == 0.0
    for i in (2, 3):
        want = float(sc[i][mask[i].bool()].mean())
        last = int(S.last_valid_index(mask)[i])
        assert rm[i, last].item() == pytest.approx(want, rel=1e-6) and rm[i].sum().item() == pytest.approx(want, rel=1e-6)
    m = t.method.pop_metrics()
    assert m["scored_rows"] == 2 and "self_certainty/mean" in m


def test_semi_supervised_emrl_uses_verl_statistics_only():
    batch = make_batch([5, 5, 4, 7], [True, True, False, False], ["1", "1", "", ""], ["1", "1", "2", "3"],
                       ["a", "a", "b", "b"])
    mask = batch.batch["response_mask"]
    ent = torch.rand(mask.shape)
    old = DataProto.from_dict(tensors={"old_log_probs": -torch.rand(mask.shape), "entropys": ent})
    t = bare_trainer(EMRL())
    t._late_surfaces(batch, old, {})
    rm = batch.batch["rm_scores"].sum(1)
    assert rm[:2].tolist() == [1.0, 1.0]
    assert rm[2].item() == pytest.approx(-float(ent[2][mask[2].bool()].mean()), rel=1e-6)


def test_engine_extension_matches_a_direct_hf_forward(base_testbed, record_property):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_", "DEVENUS_VERL"))}
    env.update({"VERL_USE_EXTERNAL_MODULES": "devenus.adapters.verl.plugin", "OMP_NUM_THREADS": "1",
                "MASTER_PORT": str(29500 + os.getpid() % 1000)})
    r = subprocess.run([sys.executable, "-W", "ignore", str(PROBE), str(base_testbed.model_dir)], env=env,
                       capture_output=True, text=True, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(lines[-1][len("PROBE "):])
    record_property("token_stats_probe", res)
    assert res["engine"] == {"fsdp": "TokenStatsFSDPEngine", "fsdp2": "TokenStatsFSDPEngine"}
    assert res["vocab_width"] == 384  # logits width (padded), not the tokenizer's ~350 tokens
    for rmpad in ("rmpad=True", "rmpad=False"):
        assert res[rmpad]["keys"] == ["entropy", "log_probs", "self_certainty"]
        assert res[rmpad]["keys_without_flag"] == ["entropy", "log_probs"]  # no flag, no extra work
        assert res[rmpad]["sc_max_abs_diff"] < 1e-4
        assert res[rmpad]["logp_max_abs_diff"] < 1e-4
    tr = res["trainer"]
    assert tr["flags_seen"] == [True] and tr["wrapper_removed"] and tr["labeled_unchanged"]
    assert tr["unlabeled_reward_max_abs_diff"] < 1e-4
    assert tr["old_log_prob_keys"] == ["entropys", "old_log_probs"]  # nothing extra travels to the update
    assert "self_certainty/mean" in tr["metrics"]
    assert res["emrl_flags_seen"] == [False]
