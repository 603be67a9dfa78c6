"""The readable step line and the end-of-run summary, on a metrics file verl's file tracker wrote (a 2-step
GRPO run of ``devenus train`` on the testbed, validation on two files of 16 questions, 2 samples each)."""

from pathlib import Path

from devenus.runs.console import step_line, summary_lines, validation
from devenus.runs.logs import read_metrics

RECORDED = Path(__file__).with_name("train_metrics.jsonl")


def test_the_recorded_file_is_verls_whole_dict():
    rows = read_metrics(RECORDED)
    assert [m["step"] for m in rows] == [0, 1, 2]
    assert len(rows[1]) > 100  # what verl's console tracker would print on one line


def test_each_step_is_one_short_line_of_the_key_metrics():
    rows = read_metrics(RECORDED)
    lines = [step_line(m, 2) for m in rows]
    assert all(len(ln) < 160 for ln in lines), lines
    assert lines[0].startswith("step 0/2 (before training) | val my_test_id ") and "reward" not in lines[0]
    r, m = lines[1], rows[1]
    assert r.startswith(f"step 1/2 | reward {m['critic/score/mean']:.3f} | response length "
                        f"{m['response_length/mean']:.1f} | {m['timing_s/step']:.1f} s | 128 rollouts"), r
    assert " | val my_test_id " in lines[2] and " my_test_ood " in lines[2]


def test_the_summary_names_steps_wall_time_validation_per_source_and_the_checkpoint():
    rows = read_metrics(RECORDED)
    first, last = validation(rows[0]), validation(rows[2])
    assert set(last) == {"my_test_id", "my_test_ood"} and all(k == 2 for _, k in last.values())
    lines = summary_lines(rows, 123.4, Path("/runs/a/checkpoints/global_step_2"))
    assert lines[:3] == ["steps: 2", "wall time: 123 s", "final validation (step 2, mean accuracy over samples):"]
    assert lines[3] == f"  my_test_id: {last['my_test_id'][0]:.3f} avg@2 (step 0: {first['my_test_id'][0]:.3f})"
    assert lines[-1] == "checkpoint: /runs/a/checkpoints/global_step_2"


def test_what_a_step_did_not_log_is_left_out():
    m = {"step": 4, "critic/score/mean": float("nan"), "val-core/a/acc/mean@2": 0.5, "val-core/a/acc/mean@8": 0.25,
         "val-core/b/reward/mean@8": 1.0, "val-aux/a/acc/std@8": 0.1}
    assert step_line(m) == "step 4 | val a 0.250 b 1.000"
    assert validation(m) == {"a": (0.25, 8), "b": (1.0, 8)}
    assert summary_lines([{"step": 1}], 5.0, None) == ["steps: 1", "wall time: 5 s", "final validation: none logged",
                                                       "checkpoint: none saved"]
