"""The run component on a stand-in for ``devenus.train``: a script that writes what verl's file tracker
and validation dumps write, so the launcher's bookkeeping is tested without starting verl."""

import json
import os
import threading
import time

import pytest

from devenus.runs import RunResult, launch, read_metrics, validation_dumps, with_file_logger
from devenus.commands import RunFailed

# writes steps 1..N like verl's FileLogger (one orjson line per log call, step 0 = validation), a
# validation dump per validated step, then sleeps if asked (argv: N sleep_s exit_code, then the overrides)
STAND_IN = """
import json, os, sys, time
n, sleep_s, code = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
ov = dict(a.lstrip('+').split('=', 1) for a in sys.argv[4:] if '=' in a)
assert 'file' in ov['trainer.logger'], ov['trainer.logger']
assert ov['ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH'].strip("'") == os.environ['VERL_FILE_LOGGER_PATH']
val = ov.get('trainer.validation_data_dir')
with open(os.environ['VERL_FILE_LOGGER_PATH'], 'wb', buffering=0) as f:
    f.write((json.dumps({'step': 0, 'data': {'val-core/acc': 0.25}}) + chr(10)).encode())
    for s in range(1, n + 1):
        f.write((json.dumps({'step': s, 'data': {'critic/score/mean': s / 10, 'pid': os.getpid()}}) + chr(10)).encode())
if val:
    os.makedirs(val, exist_ok=True)
    for s in (0, n):
        with open(os.path.join(val, f'{s}.jsonl'), 'w') as d:
            d.write(json.dumps({'input': 'user\\nWhat is 1+1?\\nassistant', 'score': 1.0 if s else 0.0}) + chr(10))
print('ValueError: something the run says at the end' if code else 'done', flush=True)
time.sleep(sleep_s)
sys.exit(code)
"""


def _launch(tmp_path, *args, overrides=(), **kw) -> RunResult:
    return launch([*overrides], tmp_path / "run", entry=("-c", STAND_IN, *map(str, args)), **kw)


def test_with_file_logger_adds_the_tracker_once():
    assert with_file_logger(["a=1"]) == ["a=1", "trainer.logger=[console,file]"]
    assert with_file_logger(["trainer.logger=[console]", "b=2"]) == ["trainer.logger=[console,file]", "b=2"]
    assert with_file_logger(["trainer.logger=[console,wandb]", "trainer.logger=['console']"])[-1] == "trainer.logger=[console,file]"
    assert with_file_logger(["++trainer.logger=[file,console]"]) == ["++trainer.logger=[file,console]"]


def test_metrics_and_dumps_come_from_files_and_resumed_launches_merge(tmp_path):
    val = tmp_path / "run" / "validation"
    seen = []
    r = _launch(tmp_path, 3, 0, 0, overrides=[f"trainer.validation_data_dir={val}"], on_step=seen.append)
    assert r.ok and r.returncode == 0
    assert [m["step"] for m in r.metrics] == [0, 1, 2, 3] and r.metrics[2]["critic/score/mean"] == 0.2
    assert [m["step"] for m in seen] == [0, 1, 2, 3]  # the progress callback saw every step, once
    assert sorted(r.validation) == [0, 3] and r.validation == validation_dumps(val)
    assert r.first_metrics_s is not None and "done" in r.output()
    # a second launch into the same folder (a resume) keeps the first launch's metrics file: steps merge,
    # the later launch's row of a step wins, and launch_metrics holds only its own
    r2 = _launch(tmp_path, 2, 0, 0)
    assert sorted(p.name for p in (tmp_path / "run" / "metrics").iterdir()) == ["0.jsonl", "1.jsonl"]
    assert [m["step"] for m in r2.metrics] == [0, 1, 2, 3] and [m["step"] for m in r2.launch_metrics] == [0, 1, 2]
    assert r2.metrics[1]["pid"] != r.metrics[1]["pid"] and r2.metrics[3]["pid"] == r.metrics[3]["pid"]
    assert r2.output().count("\ndone\n") == 1 and r2.log.read_text().count("\ndone\n") == 2


def test_a_cut_last_line_is_skipped(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"step": 1, "data": {"a": 1}}\n{"step": 1, "data": {"b": 2}}\n{"step": 2, "da')
    assert read_metrics(f) == [{"step": 1, "a": 1, "b": 2}]


def test_a_failed_run_names_its_error_and_log(tmp_path):
    r = _launch(tmp_path, 1, 0, 3)
    assert not r.ok and r.returncode == 3
    with pytest.raises(RunFailed, match=r"round 0 exited with 3: ValueError: something the run says at the end \(log: .*train.log\)"):
        r.check("round 0")


@pytest.mark.parametrize("how", ["timeout", "stop"])
def test_timeout_and_stop_kill_the_run_s_process_group(tmp_path, how):
    stop = threading.Event()
    kw = {"timeout_s": 2.0} if how == "timeout" else {"stop": stop}
    if how == "stop":
        threading.Timer(2.0, stop.set).start()
    t0 = time.perf_counter()
    r = _launch(tmp_path, 1, 300, 0, poll_s=0.1, **kw)
    assert time.perf_counter() - t0 < 30
    assert (r.timed_out, r.stopped) == ((True, False) if how == "timeout" else (False, True))
    assert r.returncode < 0 and not r.ok
    pid = r.metrics[1]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(RunFailed, match="timed out" if how == "timeout" else "was stopped"):
        r.check()


def test_importing_the_component_imports_no_torch_or_verl():
    import subprocess
    import sys

    code = "import sys, devenus.runs; print(sorted(m for m in ('torch', 'verl', 'ray', 'transformers') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
