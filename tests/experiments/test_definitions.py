"""The registered experiments (devenus.experiments.definition): each loads and builds its methods, the
committed results keep their fingerprints (a rerun of the committed seeds has nothing to do on the weights
they were made with), and each report, rerun on a copy of the committed results, writes the committed
tables byte for byte. And ``devenus experiment``: list, report, the seeds and arms a mode runs, usage errors."""

import json
import shutil
from pathlib import Path

import pytest

from devenus.cli import main
from devenus.experiments.definition import BUILTIN, EXPERIMENTS, Budget, BudgetError, Definition
from devenus.experiments.provenance import Mixing
from devenus.experiments.runner import Arm, Experiment
from devenus.online import WeakTrainerInterface

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results"
#: what each committed table needs to be tabulated (experiments/README.md says so where it is shown)
MIXING = {"label_noise": Mixing(weights=True),
          "ten_percent_labels": Mixing(code=True)}  # ttrl@0 (label_free plan) ran at a later code version


#: the committed results another experiment's report reads (a replication reads its pilot)
READS = {"label_noise_confirm": ("label_noise_rho",), "inactive_noise_confirm": ("label_noise_rho",),
         "refine_mechanism": ("label_noise_rho",),
         "label_free_confirm": ("ten_percent_labels",)}


def committed(name: str) -> bool:
    return (RESULTS / name).is_dir()


#: the held-out files the committed results of an experiment that chooses its own were validated on: the
#: fingerprint hashes their paths, which name the cache (or work) folder of the machine that ran them, so a
#: machine with other folders reruns these results. Results that record their data name them themselves.
RECORDED_VALIDATION = {"rollout_savings": {
    "test_id": Path("/root/.cache/devenus/testbed/tb-55b08013686d/data/test_id.parquet"),
    "test_id_extra": Path("/root/.cache/devenus/testbed/heldout-55b08013686d-v1/test_id_extra.parquet")}}


def recorded_validation(name: str) -> dict | None:
    if EXPERIMENTS.get(name).validation is None or not committed(name):
        return None
    if name in RECORDED_VALIDATION:
        return RECORDED_VALIDATION[name]
    rec = json.loads(next((RESULTS / name).glob("*_s*.json")).read_text())
    files = {split: Path(v["path"]) for split, v in rec["data"]["validation"].items()}
    if all(f"outputs/{name}/" in str(p) for p in files.values()):
        return None  # files the experiment writes into its work folder: the definition builds them again there
    return files


# ------------------------------------------------------------------------------ the definitions
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_registered_experiment_loads_and_builds_its_methods(name):
    d = EXPERIMENTS.get(name)
    assert d.name == name and d.summary and d.arms
    for arm in d.arms:
        WeakTrainerInterface.get(arm.method).build(dict(arm.method_config))  # a typo fails here, not after an hour
    for group, members in d.groups.items():
        assert d.arm_names(group, quick=False) == list(members)


def test_the_registry_lists_the_shipped_experiments_and_refuses_a_misnamed_one():
    assert EXPERIMENTS.names() == sorted(BUILTIN)
    d = EXPERIMENTS.get("refine_ten_percent")
    with pytest.raises(ValueError, match="registered under its own name"):
        EXPERIMENTS.register("another_name", d)
    assert "another_name" not in EXPERIMENTS
    with pytest.raises(KeyError, match=r"unknown experiment 'refine_ten_percen' \(did you mean 'refine_ten_percent'\?\)"):
        EXPERIMENTS.get("refine_ten_percen")


def test_a_budget_is_checked_with_the_runs_bounds_and_hashes_only_the_keys_set():
    b = Budget(steps=4, prompts_per_step=2, rollouts_per_prompt=2, val_n=1, kl_coef=0.0, lr=1e-5)
    assert b.as_dict() == {"steps": 4, "prompts_per_step": 2, "rollouts_per_prompt": 2, "val_n": 1, "kl_coef": 0.0,
                           "lr": 1e-5}  # the optional keys left at None are not part of it
    assert Budget(**b.as_dict(), micro_batch=8).as_dict()["micro_batch"] == 8
    with pytest.raises(BudgetError, match=r"^budget\.steps must be an integer >= 1, got 0"):
        Budget(**{**b.as_dict(), "steps": 0})
    with pytest.raises(BudgetError, match=r"budget\.lr must be a number > 0"):
        Budget(**{**b.as_dict(), "lr": 0.0})
    with pytest.raises(TypeError):
        Budget(steps=4)  # the six run sizes are stated, never defaulted


def test_a_definition_refuses_bad_seeds_and_groups():
    b = EXPERIMENTS.get("refine_ten_percent").budget
    with pytest.raises(ValueError, match="seeds must be distinct seeds >= 0"):
        Definition("x", "s", (Arm("a"),), b, seeds=(0, 0))
    with pytest.raises(ValueError, match=r"arm group 'g' must name arms .*unknown \['b'\]"):
        Definition("x", "s", (Arm("a"),), b, groups={"g": ("b",)})
    with pytest.raises(ValueError, match="other than 'list'"):
        Definition("list", "s", (Arm("a"),), b)


# ------------------------------------------------------------------------------ the committed results
@pytest.mark.parametrize("name", [n for n in sorted(BUILTIN) if committed(n)])
def test_committed_results_keep_their_fingerprints_and_need_no_rerun(name, base_testbed, tmp_path):
    d = EXPERIMENTS.get(name)
    exp = d.experiment(RESULTS / name, tmp_path / "work", validation=recorded_validation(name))
    recs = exp.records()
    assert recs
    for (arm, seed), r in recs.items():
        assert r["fingerprint"] == exp.fingerprint(exp.arm(arm)), (arm, seed)
        assert r["budget"] == d.budget.as_dict()
        if recorded_validation(name) is None and d.validation is not None:  # rebuilt here: the same bytes
            assert {k: v["sha256"] for k, v in r["data"]["validation"].items()} == \
                {k: v["sha256"] for k, v in exp.validation_hashes().items()}, (arm, seed)
    if d.model != "testbed":
        return  # the weights check below would fetch that model's weights
    # on the weights they were made with, every committed result is done: rerunning its seeds runs nothing
    current = {key for key, r in recs.items() if r.get("base_model") == exp.base_model_id()}
    assert {key for key in recs if exp.done(*key)} == current
    if current == set(recs):  # each arm on the seeds it ran (a plan may have run one arm group, or fewer seeds of an arm)
        for name in sorted({arm for arm, _ in recs}):
            assert exp.plan(sorted({seed for arm, seed in recs if arm == name}), [name]) == [], name


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_report_on_a_copy_of_the_committed_results_writes_the_committed_tables(name, tmp_path):
    d = EXPERIMENTS.get(name)
    out = tmp_path / "results"
    if committed(name):
        shutil.copytree(RESULTS / name, out / name)
    else:
        (out / name).mkdir(parents=True)
    for other in READS.get(name, ()):
        shutil.copytree(RESULTS / other, out / other)
    tables = sorted(p.name for p in RESULTS.glob(f"{name}*.*") if p.suffix in (".md", ".json"))
    for t in tables:
        shutil.copy(RESULTS / t, out / t)
    exp = d.experiment(out / name, tmp_path / "work", mixing=MIXING.get(name, Mixing()),
                       validation=recorded_validation(name))
    text = d.write_report(exp)
    assert text.startswith(f"{name}: ")
    if not committed(name):
        return
    assert tables and {t: (out / t).read_bytes() for t in tables} == {t: (RESULTS / t).read_bytes() for t in tables}
    assert text.startswith((RESULTS / f"{name}.md").read_text())


def test_trainer_config_reads_hydras_copy_with_its_numbers_and_interpolations(tmp_path):
    from devenus.experiments.runner import trainer_config

    (tmp_path / "hydra" / ".hydra").mkdir(parents=True)
    (tmp_path / "hydra" / ".hydra" / "config.yaml").write_text(
        "actor:\n  lr: 1e-5\n  n: 4\nrollout:\n  n: ${actor.n}\n  bad: ${oc.env:DEVENUS_NO_SUCH_VAR}\n")
    cfg = trainer_config(tmp_path)
    assert cfg["actor"] == {"lr": 1e-5, "n": 4}  # 1e-5 a number, as Hydra reads it
    assert cfg["rollout"]["n"] == "${actor.n}"  # one interpolation does not resolve: none is resolved
    (tmp_path / "hydra" / ".hydra" / "config.yaml").write_text("rollout:\n  n: ${actor.n}\nactor:\n  n: 4\n")
    assert trainer_config(tmp_path)["rollout"]["n"] == 4
    assert trainer_config(tmp_path / "nothing") is None


# ------------------------------------------------------------------------------ the command
def test_list_names_every_registered_experiment(capsys):
    assert main(["experiment", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == sorted(BUILTIN)


def test_report_writes_the_tables_beside_the_results_folder(tmp_path, capsys):
    results = tmp_path / "refine_ten_percent"
    shutil.copytree(RESULTS / "refine_ten_percent", results)
    assert main(["experiment", "refine_ten_percent", "--report", "--results", str(results)]) == 0
    assert capsys.readouterr().out == (RESULTS / "refine_ten_percent.md").read_text() + "\n"
    assert (tmp_path / "refine_ten_percent.md").read_bytes() == (RESULTS / "refine_ten_percent.md").read_bytes()


def test_a_refused_mix_is_one_line_and_exit_1(tmp_path, capsys):
    shutil.copytree(RESULTS / "label_noise", tmp_path / "label_noise")
    assert main(["experiment", "label_noise", "--report", "--results", str(tmp_path / "label_noise")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: label_noise: results of 2 base-model weights") and err.count("\n") == 1
    assert "--allow-mixed-weights" in err and not (tmp_path / "label_noise.md").exists()


@pytest.mark.parametrize("argv, seeds, arms, jobs", [
    (["--quick"], [0], ["grpo@inactive0.5", "olr@inactive0.5", "nl_olr2@inactive0.5", "nl_olr2_d1@inactive0.5",
                        "grpo@active0.5", "olr@active0.5", "nl_olr2@active0.5", "nl_olr2_d1@active0.5"], 2),
    (["--full", "--jobs", "1"], [0, 1, 2], None, 1),
    (["--full", "--arm", "reference"], [0, 1, 2], ["grpo@sentinel0.5", "olr@sentinel0.5", "grpo@redraw0.5",
                                                    "olr@redraw0.5"], 2),
    (["--arm", "grpo_clean", "--seed", "1,2"], [1, 2], ["grpo_clean"], 2),
])
def test_each_mode_runs_its_seeds_and_arms(argv, seeds, arms, jobs, tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(Experiment, "run", lambda self, s, names=None, jobs=1, force=False, shared_ray=True:
                        calls.append((s, names, jobs, shared_ray)) or [])
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert main(["experiment", "label_noise", *argv, "--results", str(tmp_path / "r" / "label_noise")]) == 0
    assert calls == [(seeds, arms, jobs, True)]


@pytest.mark.parametrize("argv, message", [
    (["refine_ten_percent"], "choose --quick, --full, --arm NAME[,NAME] or --report"),
    (["refine_ten_percent", "--full", "--seed", "1"], "--full runs seeds 0,1,2: --seed goes with --quick or --arm"),
    (["refine_ten_percent", "--quick", "--steps", "2"], "--steps is for smoke tests"),
    (["refine_ten_percent", "--quick", "--report"], "not allowed with argument"),
    (["refine_ten_percent", "--quick", "--jobs", "0"], "argument --jobs: must be an integer >= 1, got 0"),
    (["refine_ten_percent", "--quick", "--run-timeout", "-1"], "argument --run-timeout: must be a number >= 0"),
    (["refine_ten_percent", "--quick", "--seed", "1,1"], "seeds must be distinct integers >= 0"),
])
def test_usage_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["experiment", *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_report_without_results_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert main(["experiment", "selection", "--report", "--results", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err == f"error: no results at {tmp_path / 'none'} (run from the checkout, or name them with --results)\n"
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_experiment_is_one_line_with_a_did_you_mean(capsys):
    assert main(["experiment", "selectoin", "--report"]) == 1
    assert capsys.readouterr().err.startswith("error: unknown experiment 'selectoin' (did you mean 'selection'?)")


def test_the_label_free_arm_shares_the_ten_percent_pool_and_is_the_weak_supervision_ttrl():
    # plans/label_free.md: TTRL without labels on ten_percent_labels' pool and budget, against its grpo_full
    from devenus.experiments.definitions.weak_supervision import LABEL_FREE

    arms = {a.name: a for a in EXPERIMENTS.get("ten_percent_labels").arms}
    ttrl = arms["ttrl@0"]
    assert (ttrl.method, ttrl.labeled_fraction, ttrl.baseline, ttrl.claimed_side) == ("ttrl", 0.0, "grpo_full", -1)
    assert dict(ttrl.method_config) == LABEL_FREE["ttrl"]
