"""The refinement methods end to end through ``python -m devenus.train`` on the testbed: evidence written per
step, method state saved with verl's checkpoint and identical after a resume from it, and ``devenus
transition`` on the evidence of a real run. The default suite trains TraPO (a method with state to resume)
and checks every other method's run up to the launch (:func:`test_every_methods_run_passes_the_setup_checks`);
``bash scripts/test.sh --all`` trains them all.

Small on purpose (8 training rows, 4 per step, 4 steps: every row is visited twice) so that histories,
trajectories and proposals are exercised in minutes; thresholds are loosened so that the rules fire.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from devenus.runs.testbed import RunConfig
from e2e import train, train_steps

CASES = {
    # method: (data, method config overrides)
    "olr": ("noisy", ["+devenus.method_config.start_epoch=0", "+devenus.method_config.min_slope=0.0"]),
    "nl_olr2": ("noisy", ["+devenus.method_config.margin_visits=1", "+devenus.method_config.min_margin=0.0",
                          "+devenus.method_config.min_candidate_pass_rate=0.0",
                          "+devenus.method_config.max_label_pass_rate=1.0"]),
    "trapo": ("semi", ["+devenus.method_config.warmup=1", "+devenus.method_config.min_score=0.0"]),
    # loosened so that GeoMin can fit on 16 rollouts a step (it still waits when a class has < 2 rollouts)
    "geomin": ("semi", ["+devenus.method_config.min_per_class=2", "+devenus.method_config.min_mixture_points=2",
                        "+devenus.method_config.top_layers=2"]),
    "trapo2": ("semi", ["+devenus.method_config.min_pass_rate=0.0", "+devenus.method_config.min_slope=-1.0",
                        "+devenus.method_config.slope_probes=2", "+devenus.method_config.min_probes=1",
                        "+devenus.method_config.min_answered=1"]),
}


@pytest.fixture(scope="module")
def small_data(base_testbed, tmp_path_factory):
    """8 rows of the testbed's train split: a noisy copy (half the labels wrong, inactive noise) and a
    semi-supervised copy (half the labels hidden)."""
    from devenus.records.io import read_records
    from devenus.records.labels import hide_labels
    from devenus.records.versions import write_version
    from devenus.testbed.noise import inject_noise

    rows = read_records(base_testbed.split("train"))[:8]
    d = tmp_path_factory.mktemp("refine_data")
    write_version(inject_noise(rows, 0.5, "inactive", 0), d / "noisy.parquet", rule="test")
    write_version(hide_labels(rows, 0.5, 0), d / "semi.parquet", rule="test")
    return {"noisy": d / "noisy.parquet", "semi": d / "semi.parquet"}


def _cfg(method, data, steps=4, **kw):
    return RunConfig(method=method, steps=steps, prompts_per_step=4, rollouts_per_prompt=4, save_freq=3,
                     train_file=str(data), val_before_train=False,
                     extra_overrides=("trainer.test_freq=-1", *kw.get("extra", ())))


def test_every_methods_run_passes_the_setup_checks(base_testbed, small_data, tmp_path):
    """What each run below would launch (overrides, data), through every check devenus.train makes before Ray
    starts (the method config with the loosened thresholds, the data's label states, verl's own rules):
    the part of these runs the default suite keeps for every method but TraPO (trained below). The default
    suite's run with probes and a transition is the lifecycle's (tests/lifecycle/test_lifecycle_e2e.py)."""
    from devenus.adapters.verl.cpu.launch import cpu_overrides
    from devenus.adapters.verl.train import preflight
    from devenus.records.io import read_records
    from devenus.runs.testbed import overrides

    for method, (which, keys) in sorted(CASES.items()):
        config = preflight([*cpu_overrides(), *overrides(base_testbed, tmp_path / method, _cfg(method, small_data[which])),
                            *keys])
        assert config.devenus.method == method and config.data.train_files == str(small_data[which])
        for k in keys:  # every loosened threshold reached the method's config
            name, value = k.removeprefix("+devenus.method_config.").split("=")
            assert str(config.devenus.method_config[name]) == value, (method, name)
        assert config.trainer.save_freq == 3 and config.trainer.total_training_steps == 4  # the resume's step 3
    labeled = {w: [r["extra_info"]["labeled"] for r in read_records(p)] for w, p in small_data.items()}
    assert labeled["semi"].count(False) == 4 and all(labeled["noisy"])  # TraPO / GeoMin admit, OLR corrects


#: the one method the default suite trains end to end: the only default-tier run whose method state
#: (``devenus_method.pt``) must come back identical from a resume; the others run with ``--all``
DEFAULT = "trapo"


@pytest.mark.slow
@pytest.mark.parametrize("method", [m if m == DEFAULT else pytest.param(m, marks=pytest.mark.extended)
                                    for m in sorted(CASES)])
def test_refine_method_trains_writes_evidence_and_resumes_to_the_same_state(method, base_testbed, small_data, tmp_path):
    from devenus.records.evidence import read_evidence
    from devenus.records.versions import sha256_file
    from devenus.records.evidence import read_provenance

    which, keys = CASES[method]
    data = small_data[which]
    full = train(base_testbed, tmp_path / "full", _cfg(method, data), *keys, timeout=900)
    assert full.ok, full.tail(60)
    metrics = train_steps(full)
    assert sorted(metrics) == [1, 2, 3, 4]
    for m in metrics.values():
        assert m["devenus/evidence/rows"] >= 4  # at least one row per group and step
        assert any(k.startswith(f"devenus/{method}/") for k in m)

    ev_dir = tmp_path / "full" / "checkpoints" / "evidence"
    ev = read_evidence(ev_dir)
    assert {e["step"] for e in ev} == {1, 2, 3, 4} and {e["method"] for e in ev} == {method}
    assert read_provenance(ev_dir, 0)["datasets"][0]["sha256"] == sha256_file(data)
    visits = [e for e in ev if e["kind"] == "visit"]
    assert max(sum(e["key"] == k for e in visits) for k in {e["key"] for e in visits}) == 2  # each row seen twice

    if method == "olr":
        assert sum(m["devenus/target/corrections"] for m in metrics.values()) >= 1
        assert all("devenus/target/correction_precision" in m for m in metrics.values()
                   if m["devenus/target/corrections"] > 0)
    if method in ("trapo", "trapo2"):
        assert all("devenus/groups/admitted" in m for m in metrics.values())
    if method in ("trapo", "geomin"):  # judged in the log-prob pass, after verl moved `simulation` out of the batch
        assert any(k.startswith("devenus/mechanism/admission/") for m in metrics.values() for k in m)
    if method == "geomin":  # hidden states pooled in the Ray actor's log-prob pass reached the method
        assert all(m["devenus/geomin/layers_total"] == 5 for m in metrics.values())  # embeddings + 3 layers + norm
        assert all("devenus/geomin/admitted_share/unlabeled" in m for m in metrics.values())
        for m in metrics.values():
            if "devenus/geomin/auroc/chosen" in m:  # a step with >= 2 rollouts of each labeled class: fits and choice
                assert 0 <= m["devenus/geomin/layer/chosen"] < 5
                assert 0.0 <= m["devenus/geomin/auroc/worst"] <= m["devenus/geomin/auroc/best"] <= 1.0
    if method in ("trapo2", "nl_olr2"):
        props = [e for e in ev if e["kind"] == "proposal"]
        assert props, "the loosened thresholds must let the rule propose"
        rule = "promote" if method == "trapo2" else "correct"
        out = tmp_path / "d1.parquet"
        r = subprocess.run([sys.executable, "-m", "devenus.cli", "transition", str(data), "--evidence", str(ev_dir),
                            "--rule", rule, "--out", str(out)] +
                           (["--set", "min_pass_rate=0", "--set", "min_slope=-1"] if rule == "promote" else
                            ["--set", "min_candidate_pass_rate=0", "--set", "max_label_pass_rate=1", "--set", "min_margin=0"]),
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert out.exists() and "proposed rows changed" in r.stdout

    # resume from the step-3 checkpoint into a fresh directory: the state at step 4 must be the same. (Step 3,
    # not 2: a checkpoint at an epoch boundary, 8 rows / 4 per step, resumes verl's dataloader into another
    # shuffle of the next epoch, which is verl's behaviour and not what this test is about.)
    ckpt = tmp_path / "full" / "checkpoints"
    resumed = train(base_testbed, tmp_path / "resumed", _cfg(method, data), *keys,
                                  "trainer.resume_mode=resume_path",
                                  f"trainer.resume_from_path={ckpt / 'global_step_3'}", timeout=900)
    assert resumed.ok, resumed.tail(60)
    assert f"restored {method} state" in resumed.output()
    got = train_steps(resumed)
    assert sorted(got) == [4]
    a = torch.load(ckpt / "global_step_4" / "devenus_method.pt", weights_only=False)
    b = torch.load(tmp_path / "resumed" / "checkpoints" / "global_step_4" / "devenus_method.pt", weights_only=False)
    assert a["state"] == b["state"], f"{method}: state after resume differs from the uninterrupted run's"
    ev_a = [e for e in ev if e["step"] > 3]
    ev_b = read_evidence(tmp_path / "resumed" / "checkpoints" / "evidence")
    assert ev_a == ev_b
