"""Equal epochs (``Budget.epochs``): each arm trains ceil(epochs x its own training rows / prompts_per_step)
steps, counted from the file it trains on; ``steps`` is the most an arm may take; without ``epochs`` nothing
changes (the budget, hence every committed fingerprint, is as before)."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from devenus.cli import main
from devenus.experiments.definition import EXPERIMENTS, Budget, BudgetError
from devenus.experiments.runner import BASE, Arm, Experiment, epoch_steps

BUDGET = dict(steps=64, prompts_per_step=16, rollouts_per_prompt=8, val_n=4, kl_coef=0.01, lr=5e-5)


@pytest.mark.parametrize("epochs, rows, per_step, steps", [
    (2, 512, 16, 64),    # the full pool: 2 x 512 / 16 exactly
    (2, 297, 16, 38),    # a routed subset: 37.125 rounds up
    (1, 17, 16, 2),      # one row past a batch is one step more
    (0.3, 10, 1, 3),     # 0.3 x 10 is 3.0000000000000004 in floating point: still 3 steps
    (1.5, 16, 16, 2),
])
def test_epoch_steps_is_the_ceiling_of_epochs_times_rows_over_the_batch(epochs, rows, per_step, steps):
    assert epoch_steps(epochs, rows, per_step) == steps


def test_a_file_smaller_than_one_batch_is_refused():
    with pytest.raises(ValueError, match="^15 training rows cannot fill one step of 16 prompts$"):
        epoch_steps(2, 15, 16)


def write_rows(path: Path, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"i": list(range(n))}), path)
    return path


def experiment(tmp_path, budget: Budget, sizes: dict[str, int]) -> Experiment:
    arms = [Arm("full"), Arm("subset", "ttrl", baseline="full")]
    return Experiment("e", arms, budget.as_dict(), results=tmp_path / "r", work=tmp_path / "w",
                      train_file=lambda arm, seed, exp: write_rows(exp.work / f"{arm.name}_s{seed}.parquet", sizes[arm.name]),
                      validation={"test_id": tmp_path / "val.parquet"}, log=lambda s: None)


def test_run_config_trains_each_arm_its_own_epochs_and_base_only_validates(tmp_path):
    exp = experiment(tmp_path, Budget(**BUDGET, epochs=2.0), {"full": 512, "subset": 297})
    cfgs = {a: exp.run_config(exp.arm(a), 0, tmp_path / "out") for a in (BASE, "full", "subset")}
    assert {a: c.steps for a, c in cfgs.items()} == {BASE: 64, "full": 64, "subset": 38}
    assert cfgs[BASE].val_only and not hasattr(cfgs["full"], "epochs")  # epochs sets the steps; verl never sees it
    assert cfgs["subset"].train_file == str((tmp_path / "w" / "subset_s0.parquet").resolve())
    assert exp.train_steps(exp.arm("subset"), 0) == (38, 297)
    assert exp.train_steps(exp.arm(BASE), 0) == (64, None)


def test_without_epochs_every_arm_trains_the_budgets_steps(tmp_path):
    exp = experiment(tmp_path, Budget(**BUDGET), {"full": 512, "subset": 40})
    assert [exp.run_config(exp.arm(a), 0, tmp_path / "o").steps for a in ("full", "subset")] == [64, 64]
    assert exp.train_steps(exp.arm("subset"), 0) == (64, None)


def test_an_arm_needing_more_steps_than_the_budget_is_refused_before_any_run(tmp_path):
    exp = experiment(tmp_path, Budget(**{**BUDGET, "steps": 40}, epochs=2.0), {"full": 512, "subset": 297})
    msg = (r"^experiment 'e', arm 'full' seed 0: 2 epochs of its 512 rows need 64 steps, over the budget's steps 40 "
           r"\(the most an arm may take\)$")
    with pytest.raises(ValueError, match=msg):
        exp.run_config(exp.arm("full"), 0, tmp_path / "o")
    exp._base_model_id, exp._code = "weights", {"commit": "c", "dirty": False, "tree": "t"}
    with pytest.raises(ValueError, match=msg):
        exp.run([0], shared_ray=False)  # refused while the data is built, before a run launches
    assert not (tmp_path / "w" / "e").exists()


def test_epochs_left_unset_changes_no_budget_and_no_fingerprint(tmp_path):
    plain = Budget(**BUDGET)
    assert Budget(**BUDGET, epochs=None).as_dict() == plain.as_dict() and "epochs" not in plain.as_dict()
    a = experiment(tmp_path, plain, {"full": 32, "subset": 32})
    b = Experiment("e", a.arms, dict(BUDGET), results=tmp_path / "r", work=tmp_path / "w", validation=a.validation)
    assert a.fingerprint(a.arm("subset")) == b.fingerprint(b.arm("subset"))
    c = experiment(tmp_path, Budget(**BUDGET, epochs=2.0), {"full": 32, "subset": 32})
    assert c.fingerprint(c.arm("subset")) != a.fingerprint(a.arm("subset"))  # epochs reruns: other runs
    with pytest.raises(BudgetError, match=r"^budget\.epochs must be a number > 0"):
        Budget(**BUDGET, epochs=0.0)


def test_a_smoke_steps_override_wins_over_epochs(tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(Experiment, "run", lambda self, s, names=None, jobs=1, force=False, shared_ray=True:
                        seen.append(dict(self.budget)) or [])
    assert EXPERIMENTS.get("selection_epochs").budget.epochs == 2
    assert main(["experiment", "selection_epochs", "--quick", "--steps", "1", "--results", str(tmp_path / "r" / "x"),
                 "--work", str(tmp_path / "w")]) == 0
    assert seen[0]["steps"] == 1 and "epochs" not in seen[0]


def test_the_selection_epochs_report_states_each_arms_rows_steps_and_rollouts(tmp_path):
    import json

    d = EXPERIMENTS.get("selection_epochs")
    exp = d.experiment(tmp_path / "r" / d.name, tmp_path / "w", validation={"test_id": tmp_path / "v.parquet"})
    code = {"commit": "c", "dirty": False, "tree": "t"}
    sizes = {"grpo_full": (512, 64, 8), "ttrl_selected": (297, 38, 16), "ttrl_random": (297, 38, 16)}
    exp.results.mkdir(parents=True)
    for seed in (0, 1):
        for name, (rows, steps, per_prompt) in sizes.items():
            rec = {"experiment": d.name, "name": name, "seed": seed, "fingerprint": exp.fingerprint(exp.arm(name)),
                   "base_model": "w", "code": code, "returncode": 0, "per_question": {"ID": {"q": 0.5}},
                   "epochs": {"epochs": 2.0, "rows": rows, "steps": steps}, "config": {"run": {"steps": steps}},
                   "curves": [{"step": s, "devenus/rollouts/generated": 16 * per_prompt} for s in range(1, steps + 1)]}
            (exp.results / f"{name}_s{seed}.json").write_text(json.dumps(rec))
    text = d.report(exp)
    assert "| grpo_full | 2 | 512 | 64 | 8192 |" in text
    assert "| ttrl_selected | 2 | 297 | 38 | 9728 |" in text and "| ttrl_random | 2 | 297 | 38 | 9728 |" in text
    assert (tmp_path / "r" / "selection_epochs_cost.md").read_text() == text
