"""The hidden-state engine extension: per row and layer, hidden states pooled over the response in the
actor's own log-prob forward (GeoMin's features).

In-process: :class:`ResponsePool` on hand-built packed and padded layouts against a direct per-row mean.
In a fresh process (this file run as a script: it initialises torch.distributed and loads the plugin
through ``VERL_USE_EXTERNAL_MODULES``, as Ray workers do): verl's FSDP engine with the extension against
``output_hidden_states=True`` of a plain Hugging Face forward of the testbed model, with and without
remove-padding, and through ``DeVenusTrainer._compute_old_log_prob`` with GeoMin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
if __name__ == "__main__":  # the probe process: verl must see these before it is first imported
    os.environ.update({"VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda", "DEVENUS_VERL_CPU": "1",
                       "MASTER_ADDR": "127.0.0.1", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
    os.environ.setdefault("MASTER_PORT", "29633")

import pytest  # noqa: E402
import torch  # noqa: E402

pytest.importorskip("verl")


def test_response_pool_matches_a_direct_mean_in_both_layouts():
    from devenus.adapters.verl.token_stats import ResponsePool

    g = torch.Generator().manual_seed(0)
    seq = torch.tensor([7, 4, 9])
    resp = torch.tensor([3, 1, 5])
    mask = torch.tensor([[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 1]], dtype=torch.float32)  # a masked-out token
    d = 6
    rows = [torch.randn(int(n), d, generator=g) for n in seq]
    want = torch.stack([(r[n - k:] * mask[b, :k, None]).sum(0) / mask[b, :k].sum()
                        for b, (r, n, k) in enumerate(zip(rows, seq, resp))])
    packed = torch.cat(rows + [torch.full((2, d), 1e6)])[None]  # verl's static pad at the tail must not leak
    padded = torch.full((3, int(seq.max()), d), 1e6)
    for b, r in enumerate(rows):
        padded[b, : len(r)] = r
    for layout, hidden in (("packed", packed), ("padded", padded)):
        pool = ResponsePool(seq, resp, mask, packed=layout == "packed")
        pool.add(hidden)
        pool.add((2 * hidden, None))  # a decoder layer returns a tuple
        got = pool.means()
        assert got.shape == (3, 2, d)
        torch.testing.assert_close(got[:, 0], want, rtol=1e-5, atol=1e-5, msg=layout)
        torch.testing.assert_close(got[:, 1], 2 * want, rtol=1e-5, atol=1e-5, msg=layout)


def test_requested_stats_and_flag():
    from devenus.adapters.verl import token_stats as TS
    from devenus.online.refine.geomin import GeoMin

    assert TS.requested_stats(GeoMin().step_needs) == ("hidden_pooled",)


def test_engine_hidden_states_match_hf_output_hidden_states(base_testbed, record_property):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_", "DEVENUS_VERL"))}
    env.update({"VERL_USE_EXTERNAL_MODULES": "devenus.adapters.verl.plugin", "OMP_NUM_THREADS": "1",
                "MASTER_PORT": str(29600 + os.getpid() % 1000)})
    r = subprocess.run([sys.executable, "-W", "ignore", __file__, str(base_testbed.model_dir)], env=env,
                       capture_output=True, text=True, timeout=600, cwd=str(HERE))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(lines[-1][len("PROBE "):])
    record_property("hidden_probe", res)
    for rmpad in ("rmpad=True", "rmpad=False"):
        got = res[rmpad]
        assert got["shape"] == [6, res["hf_layers"], res["hidden_size"]]
        assert got["max_abs_diff"] < 1e-4, got
        assert got["keys_without_flag"] == ["entropy", "log_probs"]  # no flag, no hooks, no extra output
    tr = res["trainer"]
    assert tr["flags_seen"] == [True] and tr["wrapper_removed"]
    assert tr["view_shape"] == [6, res["hf_layers"], res["hidden_size"]] and tr["view_max_abs_diff"] < 1e-4
    assert tr["old_log_prob_keys"] == ["entropys", "old_log_probs"]  # nothing extra travels to the update
    assert {"labeled_correct", "labeled_incorrect", "admitted_share/unlabeled"} <= set(tr["metrics"])


# ------------------------------------------------------------------------------------------- the probe
def _hf_pooled(model_dir, batch, P):
    """[rows, L+1, d] float64 from output_hidden_states of a plain forward, one sequence at a time."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32).eval()
    am = batch.batch["attention_mask"]
    out = []
    with torch.no_grad():
        for i in range(am.shape[0]):
            rl = int(am[i, P:].sum())
            ids = batch.batch["input_ids"][i][am[i].bool()][None]
            hs = hf(ids, output_hidden_states=True).hidden_states
            out.append(torch.stack([h[0, -rl:].double().mean(0) for h in hs]))
    return torch.stack(out)


def probe(model_dir: str) -> dict:
    import verl  # noqa: F401  (loads the plugins named in VERL_USE_EXTERNAL_MODULES)
    from token_stats_probe import EngineWorkerGroup, bare_trainer, build_engine, make_batch
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    from devenus.online.refine.geomin import GeoMin, GeoMinConfig

    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    eng = build_engine(model_dir)
    P, R = 8, 12
    labeled = [True, True, False, False, False, False]
    batch = make_batch([3, 8, 5, 8, 2, 6], [12, 1, 7, 4, 12, 9], P, R, vocab=340, labeled=labeled)
    ref = _hf_pooled(model_dir, batch, P)
    res: dict = {"hf_layers": ref.shape[1], "hidden_size": ref.shape[2]}

    def run(rmpad, flag):
        td = left_right_2_no_padding(batch.to_tensordict())
        tu.assign_non_tensor(td, calculate_entropy=True, compute_loss=False)
        if flag:
            tu.assign_non_tensor(td, calculate_hidden_pooled=True)
        return EngineWorkerGroup(eng, rmpad, micro=3).compute_log_prob(td)  # 2 micro-batches: each pools its own rows

    for rmpad in (True, False):
        out = run(rmpad, True)
        h = torch.stack(list(out["hidden_pooled"].unbind())).double()
        res[f"rmpad={rmpad}"] = {"shape": list(h.shape), "max_abs_diff": float((h - ref).abs().max()),
                                 "keys_without_flag": sorted(k for k in run(rmpad, False).keys() if k != "metrics")}

    # the trainer's own _compute_old_log_prob with GeoMin: the collector sets the flag and the pooled
    # states reach the method's view; thresholds low so that the method runs its fits on 6 rows
    class Recording(EngineWorkerGroup):
        def compute_log_prob(self, td):
            self.tds.append(td)
            return super().compute_log_prob(td)

    wg = Recording(eng)
    wg.tds = []
    method = GeoMin(GeoMinConfig(min_per_class=2, min_mixture_points=2))
    t = bare_trainer(method, wg)
    seen = {}
    admit = method.admit

    def spy(view):
        seen["h"] = view.token_stats["hidden_pooled"]
        return admit(view)

    method.admit = spy
    old, _ = t._compute_old_log_prob(batch)
    res["trainer"] = {
        "flags_seen": [bool(tu.get_non_tensor_data(td, "calculate_hidden_pooled", False)) for td in wg.tds],
        "wrapper_removed": "compute_log_prob" not in vars(wg),
        "view_shape": list(seen["h"].shape),
        "view_max_abs_diff": float((seen["h"].double() - ref).abs().max()),
        "old_log_prob_keys": sorted(old.batch.keys()),
        "metrics": sorted(method.pop_metrics()),
    }
    torch.distributed.destroy_process_group()
    return res


if __name__ == "__main__":
    print("PROBE " + json.dumps(probe(sys.argv[1])))
