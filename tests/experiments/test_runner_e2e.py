"""The runner end to end through verl's real trainer on the CPU testbed: 1 arm x 1 seed x 2 steps (plus
the base's validation), one shared Ray head, metrics from verl's file tracker, per-question validation
that matches verl's own numbers, the paired comparison with the base, and a resumed sweep with nothing to
do. (That two runs of one config agree exactly, which paired seeds rest on, is
tests/adapters/verl/test_seeded_runs.py's subject; a second identical arm here cost ~150 s.)

The arm trains GRPO on 8 rows whose labels are all noisy in the OLR reference's active regime (``redraw``),
as the label-noise experiment's arms do: the same launch shows that the regime reaches verl's rewards, so
the default suite needs no launch of its own for it (tests/adapters/verl/test_noise_e2e.py: extended)."""

import json
from pathlib import Path

import pytest

from devenus.experiments.runner import BASE, Arm, Experiment
from devenus.runs import read_metrics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_validation(tmp_path_factory):
    """32 questions of each held-out split (the full 1024 x val_n would dominate a 2-step test)."""
    from devenus.records import read_records, write_records
    from devenus.experiments.runner import validation_files
    from devenus.testbed import build_testbed

    out = tmp_path_factory.mktemp("val")
    files = {}
    for split, path in validation_files(build_testbed()).items():
        rows = read_records(path)
        rows = rows[:16] + rows[-16:]  # both families of the OOD files
        write_records(rows, out / f"{split}.parquet")
        files[split] = out / f"{split}.parquet"
    return files


def redrawn_train_file(arm, seed, exp):
    """Every row of 8 noisy, redrawn at every visit (a wrong answer of the step's own rollouts)."""
    from devenus.records.io import read_records
    from devenus.records.versions import write_version
    from devenus.testbed import build_testbed
    from devenus.testbed.noise import inject_noise

    path = exp.work / "data" / f"redraw_s{seed}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = read_records(build_testbed().split("train"))[:8]
        write_version(inject_noise(rows, 1.0, "redraw", seed), path, rule="test")
    return path


def test_one_arm_one_seed_two_steps(tmp_path, small_validation):
    arms = [Arm("grpo_redraw")]
    budget = {"steps": 2, "prompts_per_step": 8, "rollouts_per_prompt": 4, "val_n": 2, "lr": 5e-5, "kl_coef": 0.01}
    default_address = Path("/tmp/ray/ray_current_cluster")
    before = default_address.read_text() if default_address.exists() else None
    exp = Experiment("e2e", arms, budget, results=tmp_path / "results" / "e2e", work=tmp_path / "work",
                     validation=small_validation, run_timeout_s=900, train_file=redrawn_train_file)
    results = exp.run([0], jobs=1, shared_ray=True)
    assert [(r["name"], r["returncode"]) for r in results] == [(BASE, 0), ("grpo_redraw", 0)]
    for r in results:
        assert r["shared_ray"] and r["val_samples"] == 2
        assert r["base_model"] == exp.base_model_id() and len(r["base_model"]) == 16  # the weights it trained
        assert {g: len(v) for g, v in r["per_question"].items() if "/" not in g} == {"ID": 64, "near-OOD": 32, "far-OOD": 32}
        # the per-question table reproduces verl's own validation metric, logged by the file tracker
        assert r["accuracy"]["ID"] == pytest.approx(r["val_metrics"]["val-core/testbed/add/acc/mean@2"])
        assert r["accuracy"]["far-OOD/count"] == pytest.approx(r["val_metrics"]["val-core/testbed/count/acc/mean@2"])
        # what it was made with: one code version per sweep, the validation files' hashes, the trainer's config
        assert r["code"] == results[0]["code"] and len(r["code"]["tree"]) == 16
        assert sorted(r["data"]["validation"]) == sorted(small_validation)
        trainer = r["config"]["trainer"]
        assert trainer["data"]["seed"] == 0 and trainer["trainer"]["total_training_steps"] == 2
        assert trainer["actor_rollout_ref"]["rollout"]["val_kwargs"]["n"] == 2  # resolved, as the trainer saw it
    assert results[0]["data"]["train"] is None  # base only validates
    assert results[1]["data"]["train"]["path"] == str(redrawn_train_file(None, 0, exp))
    assert results[1]["config"]["run"]["steps"] == 2 and "data.seed=0" in results[1]["config"]["overrides"]
    r = results[1]
    steps = read_metrics(exp.work / "e2e" / "grpo_redraw_s0" / "metrics" / "0.jsonl")  # verl's file tracker, one launch
    assert [m["step"] for m in steps if "timing_s/step" in m] == [1, 2]
    assert all(m["actor/grad_norm"] >= 0 for m in steps if "actor/grad_norm" in m)
    assert [c["step"] for c in r["curves"]] == [1, 2] and r["final_step"] == 2
    # the noise regime in verl's step: every group is noisy, so each one is redrawn or (its rollouts gave no
    # wrong answer) keeps the sentinel; the sentinel alone scores 0 everywhere, a drawn wrong answer is one
    # some rollout gave, so it scores
    for c in r["curves"]:
        assert c["devenus/noise/redrawn"] + c["devenus/noise/no_wrong_answer"] == 8, c
    assert sum(c["devenus/noise/redrawn"] for c in r["curves"]) >= 1
    assert sum(c["critic/score/mean"] for c in r["curves"]) > 0
    assert r["startup_s"] is not None and 0 < r["startup_s"] < r["wall_s"]
    # the comparison with the same seed's base is paired over questions (one seed) and is the per-question mean
    vs = exp.comparisons()["grpo_redraw"]["vs_base"]
    assert vs["by"].startswith("questions")
    base_q, arm_q = results[0]["per_question"]["ID"], r["per_question"]["ID"]
    assert set(arm_q) == set(base_q)
    assert vs["ID"]["mean"] == pytest.approx(sum(arm_q[q] - base_q[q] for q in base_q) / len(base_q))
    assert "| grpo_redraw | 1 |" in exp.report()
    assert json.loads((tmp_path / "results" / "e2e.json").read_text())["grpo_redraw"]["seeds"] == [0]
    assert exp.plan([0]) == []  # a rerun has nothing left to do
    # the shared head never advertised itself to other ray.init() callers on this machine
    assert (default_address.read_text() if default_address.exists() else None) == before
