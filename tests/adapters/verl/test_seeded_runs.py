"""Two runs of one config on the CPU backend give the same numbers; another rollout seed does not.

The second run uses verl's own agent-loop manager instead of the CPU backend's (which builds each agent
loop once per worker): the same numbers also show that the faster manager changes nothing but the time.
"""

import json
from pathlib import Path

import pytest

from devenus.recipes.testbed_train import RunConfig, accuracy_from_dump, parse_console_metrics
from e2e import run_train, train_cmd

pytestmark = [pytest.mark.verl, pytest.mark.slow]

# what a step's numbers depend on: the sampled responses, their rewards, the update they drive
STEP_KEYS = ("critic/score/mean", "critic/rewards/mean", "response_length/mean", "response_length/max",
             "actor/entropy", "actor/pg_loss", "actor/grad_norm")


def _run(tb, out: Path, val_file: Path, seed_overrides: tuple[str, ...] = ()):
    cfg = RunConfig(steps=2, prompts_per_step=4, rollouts_per_prompt=4, val_n=2,
                    extra_overrides=(f"data.val_files=[{val_file}]", *seed_overrides))
    r = run_train(train_cmd(tb, out, cfg), timeout=1200)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    metrics = {m["step"]: m for m in parse_console_metrics(r.stdout.splitlines()) if m["step"] > 0}
    dumps = {p.stem: [json.loads(line) for line in p.read_text().splitlines()]
             for p in sorted((out / "validation").glob("*.jsonl"))}
    return r, metrics, dumps, accuracy_from_dump(tb, out / "validation")


def test_same_config_same_numbers(base_testbed, tmp_path):
    from devenus.records import read_records, write_records

    val_file = tmp_path / "val.parquet"  # 24 held-out questions: validation stays cheap
    write_records(read_records(base_testbed.split("test_id"))[:24], val_file)

    r1, m1, d1, acc1 = _run(base_testbed, tmp_path / "a", val_file)
    r2, m2, d2, acc2 = _run(base_testbed, tmp_path / "b", val_file,
                            ("++actor_rollout_ref.rollout.agent.agent_loop_manager_class=null",))
    assert "backend cpu (auto: no accelerator visible to torch" in r1.stdout
    assert set(m1) == set(m2) == {1, 2}
    for step in (1, 2):
        for key in STEP_KEYS:
            assert m1[step][key] == m2[step][key], (step, key, m1[step][key], m2[step][key])
    assert set(d1) == set(d2) == {"0", "2"}  # validation before training and after step 2
    for step in d1:
        assert [(e["output"], e["score"]) for e in d1[step]] == [(e["output"], e["score"]) for e in d2[step]]
    assert acc1 == acc2

    # the same config with another rollout seed samples other responses (the comparison above can fail)
    _, m3, d3, _ = _run(base_testbed, tmp_path / "c", val_file, ("actor_rollout_ref.rollout.seed=1",))
    assert [e["output"] for e in d3["0"]] != [e["output"] for e in d1["0"]]
    assert any(m3[s][k] != m1[s][k] for s in (1, 2) for k in STEP_KEYS)
