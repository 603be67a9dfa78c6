"""The experiment runner's bookkeeping: resume after a kill (finished (arm, seed) results kept, atomic
writes), the plan (baselines of the same seed), and the paired report. The trainer itself is exercised
by test_runner_e2e.py; here a stand-in writes each run's record so a sweep can be killed in seconds."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from devenus.experiments.provenance import MixedResults, Mixing
from devenus.experiments.runner import BASE, Arm, Experiment

ARMS = [Arm("grpo_full"), Arm("ttrl@10", "ttrl", 0.1, baseline="grpo_full")]


MODEL = "weights-a"  # stands in for the hash of the base model's weights (no testbed needed here)
CODE = {"commit": "c0ffee" * 6 + "abcd", "dirty": False, "version": "0.1.0", "tree": "tree-a"}  # a code version


def make(tmp_path, budget=None, model=MODEL, mixing=Mixing()) -> Experiment:
    exp = Experiment("t", ARMS, budget or {"steps": 2}, results=tmp_path / "results" / "t", work=tmp_path / "work",
                     log=lambda s: None, mixing=mixing)
    exp._base_model_id = model
    exp._code = CODE
    return exp


def record(exp: Experiment, name: str, seed: int, per_q: dict, rc: int = 0, model=MODEL, code=CODE) -> dict:
    acc = {g: sum(v.values()) / len(v) for g, v in per_q.items()}
    return {"experiment": exp.name, "name": name, "seed": seed, "fingerprint": exp.fingerprint(exp.arm(name)),
            "base_model": model, **({"code": code} if code else {}),
            "returncode": rc, "wall_s": 10.0, "startup_s": 5.0, "per_question": per_q if rc == 0 else {},
            "accuracy": acc, "curves": [{"step": s, "devenus/target/accuracy": 0.5} for s in (1, 2)], "val_samples": 4}


def test_plan_skips_finished_runs_and_reruns_failed_changed_or_corrupt_ones(tmp_path):
    exp = make(tmp_path)
    q = {"ID": {"a": 0.5}}
    assert exp.plan([0]) == [(BASE, 0), ("grpo_full", 0), ("ttrl@10", 0)]
    exp._save(BASE, 0, record(exp, BASE, 0, q))
    exp._save("grpo_full", 0, record(exp, "grpo_full", 0, q))
    exp._save("ttrl@10", 0, record(exp, "ttrl@10", 0, q, rc=1))
    (exp.results / ".ttrl@10_s0.json.123.tmp").write_text("{half a reco")  # a write cut by a kill
    assert exp.plan([0]) == [("ttrl@10", 0)]
    assert exp.plan([0], force=True) == [(BASE, 0), ("grpo_full", 0), ("ttrl@10", 0)]
    # one arm asked for brings the baselines it is compared with (same seed)
    assert exp.plan([1], ["ttrl@10"]) == [(BASE, 1), ("grpo_full", 1), ("ttrl@10", 1)]
    exp.result_path("grpo_full", 0).write_text("{not json")
    assert exp.plan([0]) == [("grpo_full", 0), ("ttrl@10", 0)]
    assert make(tmp_path, {"steps": 3}).plan([0]) == [(BASE, 0), ("grpo_full", 0), ("ttrl@10", 0)]  # another budget
    # other weights under the same testbed key (SFT on another CPU): nothing of theirs is reused
    assert make(tmp_path, model="weights-b").plan([0]) == [(BASE, 0), ("grpo_full", 0), ("ttrl@10", 0)]
    legacy = record(exp, BASE, 0, q, code=None)
    del legacy["base_model"]  # a result from before the field: its weights are unknown, so it is rerun
    exp.result_path(BASE, 0).write_text(json.dumps(legacy))
    assert (BASE, 0) in exp.plan([0])
    with pytest.raises(ValueError):
        exp.plan([0], ["nope"])


def superseded(exp: Experiment) -> dict[str, list[str]]:
    root = exp.results / "superseded"
    return {d.name: sorted(p.name for p in d.iterdir()) for d in sorted(root.iterdir())} if root.exists() else {}


def test_a_finished_result_is_never_overwritten_but_moved_aside_with_its_reason(tmp_path):
    old, new = make(tmp_path, model="weights-a"), make(tmp_path, model="weights-b")
    q = {"ID": {"a": 0.5}}
    old._save(BASE, 0, record(old, BASE, 0, q, model="weights-a"))
    old._save("grpo_full", 0, record(old, "grpo_full", 0, q, rc=1, model="weights-a"))  # failed: nothing to keep
    new._save(BASE, 0, record(new, BASE, 0, {"ID": {"a": 0.7}}, model="weights-b"))
    new._save("grpo_full", 0, record(new, "grpo_full", 0, q, model="weights-b"))
    assert superseded(new) == {"weights": ["base_s0.weights-a.tree-a.json"]}
    kept = new.results / "superseded" / "weights" / "base_s0.weights-a.tree-a.json"
    assert json.loads(kept.read_text())["accuracy"]["ID"] == 0.5
    assert {k: r["base_model"] for k, r in new.records().items()} == {(BASE, 0): "weights-b", ("grpo_full", 0): "weights-b"}
    # the same run again (--force): the earlier one is kept too, and so is the one before it
    new._save(BASE, 0, record(new, BASE, 0, {"ID": {"a": 0.6}}, model="weights-b"))
    new._save(BASE, 0, record(new, BASE, 0, q, model="weights-b"))
    assert superseded(new)["rerun"] == ["base_s0.weights-b.tree-a.2.json", "base_s0.weights-b.tree-a.json"]
    assert json.loads((new.results / "superseded" / "rerun" / "base_s0.weights-b.tree-a.json").read_text())["accuracy"]["ID"] == 0.7
    # another code version, then another configuration (a budget change): each says why it was replaced
    newer = make(tmp_path, model="weights-b")
    newer._code = {**CODE, "tree": "tree-b"}
    newer._save(BASE, 0, record(newer, BASE, 0, q, model="weights-b", code=newer._code))
    other = make(tmp_path, budget={"steps": 3}, model="weights-b")
    other._save("grpo_full", 0, record(other, "grpo_full", 0, q, model="weights-b"))
    assert superseded(new)["code"] == ["base_s0.weights-b.tree-a.json"]
    assert superseded(new)["config"] == ["grpo_full_s0.weights-b.tree-a.json"]
    assert sorted(p.name for p in new.results.glob("*.json")) == ["base_s0.json", "grpo_full_s0.json"]


def test_a_legacy_result_without_weights_is_rerun_and_moved_aside_not_overwritten(tmp_path):
    exp = make(tmp_path)
    legacy = record(exp, BASE, 0, {"ID": {"a": 0.5}}, code=None)
    del legacy["base_model"]
    exp.results.mkdir(parents=True)
    exp.result_path(BASE, 0).write_text(json.dumps(legacy))  # as committed results from before the fields are
    assert (BASE, 0) in exp.plan([0])
    exp._save(BASE, 0, record(exp, BASE, 0, {"ID": {"a": 0.7}}))
    assert superseded(exp) == {"weights": ["base_s0.unrecorded.unrecorded.json"]}
    assert json.loads((exp.results / "superseded/weights/base_s0.unrecorded.unrecorded.json").read_text()) == legacy


STAND_IN = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from devenus.experiments.runner import Arm, Experiment

    class StandIn(Experiment):  # the bookkeeping of Experiment.run, with a sleep for the trainer
        def run_one(self, name, seed, ray=None):
            with open(self.work / "calls.log", "a") as f:
                f.write(f"{name} {seed}\\n")
            time.sleep(1.5)
            per_q = {"ID": {"a": 0.5, "b": 0.25}}
            return self._save(name, seed, {"experiment": self.name, "name": name, "seed": seed,
                "fingerprint": self.fingerprint(self.arm(name)), "base_model": self.base_model_id(),
                "code": self.code_version(), "returncode": 0, "wall_s": 1.5, "startup_s": None,
                "per_question": per_q, "accuracy": {"ID": 0.375}, "curves": []})

    arms = [Arm("grpo_full"), Arm("ttrl@10", "ttrl", 0.1, baseline="grpo_full")]
    root = Path(sys.argv[1])
    exp = StandIn("t", arms, {"steps": 2}, results=root / "results" / "t", work=root / "work")
    exp._base_model_id = "weights-a"
    (root / "work").mkdir(parents=True, exist_ok=True)
    exp.run([0, 1], jobs=1, shared_ray=False)
""")


def test_a_killed_sweep_resumes_where_it_stopped(tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text(STAND_IN)
    exp = make(tmp_path)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], start_new_session=True)
    try:
        deadline = time.time() + 120
        while len(list(exp.results.glob("*.json"))) < 2 and time.time() < deadline:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    first = {p.name: p.stat().st_mtime_ns for p in exp.results.glob("*.json")}
    assert 2 <= len(first) < 6
    calls_before = (tmp_path / "work" / "calls.log").read_text().split("\n")
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, timeout=120,
                         capture_output=True, text=True)
    assert "start-up -" in out.stdout + out.stderr and "Nones" not in out.stdout + out.stderr  # no step 1 to time
    calls = (tmp_path / "work" / "calls.log").read_text().split("\n")[len(calls_before) - 1:]
    done = {p.name: p.stat().st_mtime_ns for p in exp.results.glob("*.json")}
    assert len(done) == 6  # base, grpo_full, ttrl@10 for seeds 0 and 1
    assert all(done[n] == t for n, t in first.items())  # finished results kept, not rerun
    rerun = {tuple(c.split()) for c in calls if c}
    assert len(rerun) == 6 - len(first)
    assert not list(exp.results.glob(".*.tmp"))
    assert exp.plan([0, 1]) == []


def test_report_pairs_by_seed_or_by_question(tmp_path):
    exp = make(tmp_path)
    qs = [f"q{i}" for i in range(8)]
    for seed, (b, g, t) in enumerate([(0.2, 0.5, 0.6), (0.3, 0.5, 0.55), (0.25, 0.6, 0.6)]):
        for name, v in ((BASE, b), ("grpo_full", g), ("ttrl@10", t)):
            per_q = {"ID": {q: v + (0.1 if i % 2 else -0.1) for i, q in enumerate(qs)},
                     "far-OOD": {q: 0.3 for q in qs}, "far-OOD/count": {q: 0.3 for q in qs}}
            exp._save(name, seed, record(exp, name, seed, per_q))
    comp = exp.comparisons()
    vs = comp["grpo_full"]["vs_base"]
    assert vs["by"] == "seeds" and vs["seeds"] == [0, 1, 2]
    assert vs["ID"]["mean"] == pytest.approx((0.3 + 0.2 + 0.35) / 3)
    assert vs["ID"]["half_width"] == pytest.approx(0.1898, abs=1e-4)  # t(2) = 4.303 over the 3 paired differences
    assert comp["ttrl@10"]["vs_baseline"]["ref"] == "grpo_full"
    assert comp["ttrl@10"]["vs_baseline"]["far-OOD"]["mean"] == pytest.approx(0.0)
    table = exp.report()
    assert "| grpo_full | 3 | 0.533 ± 0.143 |" in table  # mean over seeds, Student t with 2 df
    assert (exp.results.parent / "t.md").exists() and json.loads((exp.results.parent / "t.json").read_text())
    # with one seed the interval is over questions (evaluation noise only), and says so
    one = make(tmp_path / "one")
    for name, v in ((BASE, 0.2), ("grpo_full", 0.5)):
        one._save(name, 0, record(one, name, 0, {"ID": {q: v + 0.01 * i for i, q in enumerate(qs)}}))
    vs = one.comparisons()["grpo_full"]["vs_base"]
    assert vs["by"].startswith("questions") and vs["ID"]["n"] == 8
    assert vs["ID"]["mean"] == pytest.approx(0.3) and vs["ID"]["half_width"] == pytest.approx(0.0, abs=1e-9)


def test_the_verdict_follows_the_claimed_side_over_seeds(tmp_path):
    exp = Experiment("v", [Arm("grpo_full"), Arm("x@10", "ttrl", 0.1, baseline="grpo_full", claimed_side=1),
                           Arm("y@0", "ttrl", 0.0, baseline="grpo_full", claimed_side=-1)],
                     {"steps": 2}, results=tmp_path / "results" / "v", work=tmp_path / "work", log=lambda s: None)
    for seed, (g, x, y) in enumerate([(0.5, 0.6, 0.3), (0.45, 0.58, 0.31), (0.55, 0.61, 0.29)]):
        for name, v in ((BASE, 0.2), ("grpo_full", g), ("x@10", x), ("y@0", y)):
            exp._save(name, seed, record(exp, name, seed, {"ID": {"q": v}}))
    comp = exp.comparisons()
    assert comp["x@10"]["vs_baseline"]["verdict_ID"] == "excludes 0 (claimed side)"
    assert comp["y@0"]["vs_baseline"]["verdict_ID"] == "excludes 0 (claimed side)"
    assert "excludes 0 (claimed side)" in exp.report(write=False)


def test_a_run_dies_with_a_runner_killed_by_sigkill(tmp_path):
    """Runs live in their own process groups; a runner killed with SIGKILL must not leave them behind."""
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(f"""
        import subprocess, time
        from devenus.runs.launch import guard_group
        p = subprocess.Popen(["sleep", "300"], start_new_session=True)
        guard_group(p.pid)
        open({str(pid_file)!r}, "w").write(str(p.pid))
        time.sleep(300)
    """)
    runner = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    os.kill(child, 0)  # alive
    runner.kill()
    runner.wait()
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.killpg(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.killpg(child, signal.SIGKILL)
        pytest.fail("the run outlived its runner")


SLOW_RUNS = textwrap.dedent("""
    import sys
    from pathlib import Path
    from devenus.experiments.runner import Arm, Experiment

    class Sleepy(Experiment):  # Experiment.run_one as it is, launching a process that never ends
        def _testbed(self):
            return None
        def run_config(self, arm, seed, out, extra=()):
            return None
        def validation_files(self):
            return {}
        entry = ("-c", "import time; open('started', 'a').write('x'); time.sleep(300)  # " + sys.argv[2])
        def command(self, tb, out, cfg):
            return []

    root = Path(sys.argv[1])
    exp = Sleepy("t", [Arm("grpo_full")], {"steps": 2}, results=root / "results" / "t", work=root / "work")
    exp._base_model_id = "weights-a"
    exp.run([0], jobs=2, shared_ray=False)
""")


def test_sigterm_stops_the_runs_in_flight(tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text(SLOW_RUNS)
    marker = f"dvsleepmarker-{uuid.uuid4().hex}"  # this test's runs only, not another test run's on the machine
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), marker], cwd=tmp_path)
    started = tmp_path / "started"
    deadline = time.time() + 60
    while (not started.exists() or len(started.read_text()) < 2) and time.time() < deadline:
        time.sleep(0.1)
    assert started.read_text() == "xx"  # base and grpo_full, side by side
    proc.terminate()
    assert proc.wait(timeout=30) != 0
    deadline = time.time() + 30  # the kill is sent before the sweep exits; a loaded machine reaps slowly
    while (left := subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.strip()) \
            and time.time() < deadline:
        time.sleep(0.2)
    assert left == ""  # both runs were killed, not left behind
    recs = [json.loads(p.read_text()) for p in (tmp_path / "results" / "t").glob("*.json")]
    assert recs and all(r["returncode"] != 0 for r in recs)  # recorded as failed: a rerun redoes them


def test_differences_pair_only_runs_of_the_same_weights(tmp_path):
    """Seed 1's baseline ran on other weights (same testbed key, another CPU): refused; allowed, that seed is
    left out of the paired difference and named, never paired across models."""
    exp = make(tmp_path)
    qs = [f"q{i}" for i in range(8)]
    for seed, (b, g) in enumerate([(0.2, 0.5), (0.3, 0.9), (0.25, 0.6)]):
        for name, v in ((BASE, b), ("grpo_full", g)):
            model = "weights-b" if (seed, name) == (1, BASE) else MODEL
            exp._save(name, seed, record(exp, name, seed, {"ID": {q: v for q in qs}}, model=model))
    with pytest.raises(MixedResults, match=r"weights-a \(base s0,2; grpo_full s0,1,2\) vs weights-b \(base s1\)"):
        exp.comparisons()
    exp.mixing = Mixing(weights=True)
    vs = exp.comparisons()["grpo_full"]["vs_base"]
    assert vs["seeds"] == [0, 2] and vs["other_base_model"] == [1]
    assert vs["ID"]["mean"] == pytest.approx((0.3 + 0.35) / 2)


def test_seeds_on_other_weights_are_refused_unless_allowed_then_pair_within_the_seed(tmp_path):
    """A sweep resumed on another machine: seed 0 ran on one set of weights, seeds 1-2 on another. The table
    is refused, naming both sets and their runs; allowed, each seed pairs its own runs, so all three seeds
    enter the interval, and the report says which weights."""
    exp = make(tmp_path)
    qs = [f"q{i}" for i in range(8)]
    for seed, (b, g) in enumerate([(0.2, 0.5), (0.3, 0.5), (0.25, 0.6)]):
        model = MODEL if seed == 0 else "weights-b"
        for name, v in ((BASE, b), ("grpo_full", g)):
            exp._save(name, seed, record(exp, name, seed, {"ID": {q: v for q in qs}}, model=model))
    with pytest.raises(MixedResults) as e:
        exp.report(write=False)
    assert str(e.value) == ("t: results of 2 base-model weights: weights-a (base s0; grpo_full s0) vs weights-b "
                            "(base s1,2; grpo_full s1,2); pass --allow-mixed-weights to tabulate and pair them together")
    assert not (exp.results.parent / "t.md").exists()
    exp.mixing = Mixing(weights=True)
    vs = exp.comparisons()["grpo_full"]["vs_base"]
    assert vs["seeds"] == [0, 1, 2] and "other_base_model" not in vs
    assert vs["ID"]["mean"] == pytest.approx((0.3 + 0.2 + 0.35) / 3)
    table = exp.report(write=False)
    assert f"Base-model weights: {MODEL} (base s0; grpo_full s0); weights-b (base s1,2; grpo_full s1,2)." in table
    one = make(tmp_path / "one")  # one set of weights: named once
    one._save(BASE, 0, record(one, BASE, 0, {"ID": {"q": 0.2}}))
    assert f"Base-model weights: {MODEL}.\n" in one.report(write=False)


def _two_seeds(exp: Experiment, code_of) -> None:
    for seed in (0, 1):
        for name, v in ((BASE, 0.2), ("grpo_full", 0.5), ("ttrl@10", 0.45)):
            exp._save(name, seed, record(exp, name, seed, {"ID": {"q": v + 0.01 * seed}}, code=code_of(name, seed)))


def test_results_of_two_code_versions_are_refused_unless_allowed(tmp_path):
    """ttrl@10's seed 1 ran on other code (its warm-up changed, say): no table, no pairing, until told."""
    exp = make(tmp_path)
    dirty = {**CODE, "commit": "1234567890ab" + "0" * 28, "dirty": True, "tree": "tree-b"}
    _two_seeds(exp, lambda name, seed: dirty if (name, seed) == ("ttrl@10", 1) else CODE)
    with pytest.raises(MixedResults) as e:
        exp.comparisons()
    msg = str(e.value)
    assert "\n" not in msg and msg == (
        "t: results of 2 code versions: commit c0ffeec0ffee (tree tree-a) (base s0,1; grpo_full s0,1; ttrl@10 s0) "
        "vs commit 1234567890ab (dirty; tree tree-b) (ttrl@10 s1); pass --allow-mixed-code to tabulate and pair "
        "them together")
    with pytest.raises(MixedResults):
        exp.report()
    assert not (exp.results.parent / "t.md").exists()
    exp.mixing = Mixing(code=True)
    assert exp.comparisons()["ttrl@10"]["vs_baseline"]["seeds"] == [0, 1]  # paired across the versions, as told
    table = exp.report(write=False)
    assert ("Code: commit c0ffeec0ffee (tree tree-a) (base s0,1; grpo_full s0,1; ttrl@10 s0); commit 1234567890ab "
            "(dirty; tree tree-b) (ttrl@10 s1).") in table
    # a commit that left the package's tree as it was is the same code version
    same = make(tmp_path / "same")
    _two_seeds(same, lambda name, seed: {**CODE, "commit": "f" * 40} if seed else CODE)
    assert same.comparisons()["grpo_full"]["vs_base"]["seeds"] == [0, 1]


def test_a_sweep_that_would_mix_code_versions_is_refused_before_any_run(tmp_path):
    calls = []

    class StandIn(Experiment):
        def run_one(self, name, seed, ray=None):
            calls.append((name, seed))
            return self._save(name, seed, record(self, name, seed, {"ID": {"q": 0.5}}, code=self._code))

    old = make(tmp_path)
    _two_seeds(old, lambda name, seed: CODE)
    new = make(tmp_path)
    new.__class__ = StandIn
    new._code = {**CODE, "tree": "tree-b"}
    with pytest.raises(MixedResults, match=r"commit c0ffeec0ffee \(tree tree-a\) \(base s0,1; grpo_full s0,1; ttrl@10 "
                                           r"s0,1\) vs commit c0ffeec0ffee \(tree tree-b\) \(base s2; grpo_full s2; "
                                           r"ttrl@10 s2\)"):
        new.run([2], shared_ray=False)
    assert calls == []
    new.mixing = Mixing(code=True)
    new.run([2], shared_ray=False)
    assert sorted(calls) == [(BASE, 2), ("grpo_full", 2), ("ttrl@10", 2)]


def test_legacy_results_without_a_code_version_load_as_unrecorded_and_never_pair_with_recorded_ones(tmp_path):
    legacy = make(tmp_path)
    _two_seeds(legacy, lambda name, seed: None)  # as the committed results are: no code field
    assert "Code: unrecorded.\n" in legacy.report(write=False)
    assert legacy.comparisons()["grpo_full"]["vs_base"]["seeds"] == [0, 1]
    legacy._save(BASE, 2, record(legacy, BASE, 2, {"ID": {"q": 0.2}}))  # a new seed, run on recorded code
    with pytest.raises(MixedResults, match=r"results of 2 code versions: unrecorded \(base s0,1; grpo_full s0,1; "
                                           r"ttrl@10 s0,1\) vs commit c0ffeec0ffee \(tree tree-a\) \(base s2\)"):
        legacy.report(write=False)
    legacy.mixing = Mixing(code=True)
    assert "Code: unrecorded (base s0,1; grpo_full s0,1; ttrl@10 s0,1); commit c0ffeec0ffee" in legacy.report(write=False)


def test_the_code_version_names_the_commit_and_dirty_flag_in_a_checkout_and_hashes_the_tree_outside(tmp_path):
    import shutil

    from devenus.experiments.provenance import code_label, code_version

    pkg = tmp_path / "repo" / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"compiled")
    git = ["git", "-C", str(tmp_path / "repo"), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (tmp_path / "repo" / ".gitignore").write_text("__pycache__/\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "a"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    clean = code_version(pkg)
    assert clean["commit"] == head and clean["dirty"] is False and len(clean["tree"]) == 16
    (tmp_path / "repo" / "notes.md").write_text("results, docs: outside the package\n")
    assert code_version(pkg)["dirty"] is False
    (pkg / "b.py").write_text("y = 2\n")  # an uncommitted module changes the code
    dirty = code_version(pkg)
    assert dirty["dirty"] is True and dirty["tree"] != clean["tree"]
    assert code_label({"code": dirty}) == f"commit {head[:12]} (dirty; tree {dirty['tree']})"
    outside = tmp_path / "installed" / "pkg"  # an installed copy: no git, the same files, the same tree
    shutil.copytree(pkg, outside)
    inst = code_version(outside)
    assert inst["commit"] is None and inst["dirty"] is None and inst["tree"] == dirty["tree"]
    assert code_label({"code": inst}).startswith("devenus ") and code_label({}) == "unrecorded"


def test_the_report_picture_draws_each_paired_difference(tmp_path):
    """The forest plot: one row per arm with a paired difference, per-seed dots equal to arm - baseline."""
    pytest.importorskip("matplotlib")
    from devenus.experiments.plot import per_seed_differences, plot_differences

    recs = {(arm, s): {"accuracy": {"ID": acc + 0.01 * s, "far-OOD": 0.3}}
            for arm, acc in (("base", 0.2), ("grpo", 0.5), ("ttrl", 0.45)) for s in (0, 1)}
    recs[("ttrl", 1)]["accuracy"]["ID"] = 0.40
    assert per_seed_differences(recs, "ttrl", "grpo", "ID", [0, 1]) == pytest.approx([-0.05, -0.11])
    iv = {"mean": -0.08, "half_width": 0.3, "n": 2, "level": 0.95}
    comp = {"base": {"seeds": [0, 1]},
            "grpo": {"vs_base": {"ref": "base", "by": "seeds", "seeds": [0, 1], "ID": iv, "far-OOD": iv}},
            "ttrl": {"vs_baseline": {"ref": "grpo", "by": "seeds", "seeds": [0, 1], "ID": iv, "verdict_ID": "inconclusive"}}}
    out = plot_differences("x", comp, recs, tmp_path / "x.png")
    assert out == tmp_path / "x.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"]  # no temporary file left behind
    assert plot_differences("x", {"base": {"seeds": [0]}}, recs, tmp_path / "y.png") is None


# ---- two-round arms (a Transition: train on D(1) built from another arm's evidence)
def _two_round(tmp_path, train_file):
    from devenus.experiments.runner import Transition

    arms = [Arm("grpo_noisy"), Arm("nl_olr2", "nl_olr2", baseline="grpo_noisy"),
            Arm("nl_olr2_d1", "grpo", baseline="grpo_noisy", transition=Transition("nl_olr2", "correct"))]
    exp = Experiment("t2", arms, {"steps": 2}, results=tmp_path / "results" / "t2", work=tmp_path / "work",
                     train_file=train_file, log=lambda s: None)
    exp._base_model_id = MODEL
    return exp


def test_a_two_round_arm_is_checked_when_the_experiment_is_built(tmp_path):
    from devenus.experiments.runner import Transition

    def build(*arms):
        return Experiment("t2", [Arm("a", "nl_olr2"), Arm("p", "trapo2"), *arms], {"steps": 2},
                          results=tmp_path / "r", work=tmp_path / "w")

    with pytest.raises(ValueError, match="transition source 'nope' is not another arm"):
        build(Arm("d1", transition=Transition("nope", "correct")))
    with pytest.raises(ValueError, match="rule 'promote' applies trapo2's proposals, but the source arm 'a' trains nl_olr2"):
        build(Arm("d1", transition=Transition("a", "promote")))
    with pytest.raises(ValueError, match="rule 'correct': unknown key min_slope"):
        build(Arm("d1", transition=Transition("a", "correct", {"min_slope": 0.1})))
    with pytest.raises(ValueError, match="is itself a two-round arm"):
        build(Arm("d1", transition=Transition("a", "correct")), Arm("d2", transition=Transition("d1", "correct")))
    build(Arm("d1", transition=Transition("a", "correct")), Arm("d2", transition=Transition("p", "promote")))


def test_two_round_plan_runs_the_source_first_and_again_when_its_evidence_is_gone(tmp_path):
    exp = _two_round(tmp_path, train_file=lambda arm, seed, exp: tmp_path / "d0.parquet")
    q = {"ID": {"a": 0.5}}
    # asked for alone, the two-round arm brings its source run and the baselines of both (same seed)
    assert exp.plan([0], ["nl_olr2_d1"]) == [(BASE, 0), ("grpo_noisy", 0), ("nl_olr2", 0), ("nl_olr2_d1", 0)]
    for n in (BASE, "grpo_noisy", "nl_olr2"):
        exp._save(n, 0, record(exp, n, 0, q))
    # the source's result is on disk but its evidence is not (another machine): the source runs again
    assert exp.plan([0]) == [("nl_olr2", 0), ("nl_olr2_d1", 0)]
    exp.evidence_dir("nl_olr2", 0).mkdir(parents=True)
    assert exp.plan([0]) == [("nl_olr2_d1", 0)]
    exp._save("nl_olr2_d1", 0, record(exp, "nl_olr2_d1", 0, q))
    assert exp.plan([0]) == []  # finished: its D(1) is kept with the results, the evidence is not needed


def test_a_two_round_arm_trains_on_d1_from_its_sources_evidence(tmp_path, transition_inputs):
    make_dataset, make_evidence = transition_inputs.make_dataset, transition_inputs.make_evidence
    from devenus.records.io import read_records
    from devenus.records.versions import verify_manifest

    d0 = make_dataset(tmp_path / "d0.parquet")
    seen = []

    class StandIn(Experiment):
        def run_one(self, name, seed, ray=None):
            arm = self.arm(name)
            cfg = self.run_config(arm, seed, self.run_dir(name, seed))
            seen.append((name, cfg.train_file))
            if name == "nl_olr2":  # the source's run writes its evidence (proposals of the correct rule)
                make_evidence(self.evidence_dir(name, seed), d0)
            rec = record(self, name, seed, {"ID": {"a": 0.5}})
            if arm.transition is not None:
                rec["transition"] = self._transitions[(name, seed)]
            return self._save(name, seed, rec)

    exp = _two_round(tmp_path, train_file=lambda arm, seed, exp: d0)
    exp.__class__ = StandIn
    exp.run([0], jobs=2, shared_ray=False)
    order = [n for n, _ in seen]
    assert order.index("nl_olr2") < order.index("nl_olr2_d1")  # the second wave starts after the first
    d1 = exp.transition_path("nl_olr2_d1", 0)
    assert dict(seen)["nl_olr2_d1"] == str(d1) and dict(seen)["grpo_noisy"] == str(d0)
    verify_manifest(str(d1), [str(d0)])  # D(1) is a dataset version whose parent is D(0)
    t = json.loads(exp.result_path("nl_olr2_d1", 0).read_text())["transition"]
    # the fixture proposes a correction for each of the 10 noisy rows; 4 of the candidates are wrong
    assert (t["source"], t["rule"], t["proposals"], t["accepted"]) == ("nl_olr2", "correct", 10, 10)
    assert t["precision"] == pytest.approx(0.6) and t["recall"] == pytest.approx(0.6)
    rows = {r["extra_info"]["index"]: r for r in read_records(d1)}
    assert rows["k4"]["reward_model"]["ground_truth"] == "4" and rows["k4"]["extra_info"]["label_source"] == "corrected"
    before = d1.read_bytes()
    exp.build_transition("nl_olr2_d1", 0)  # rebuilt from the same evidence: byte-identical
    assert d1.read_bytes() == before


def test_seed_list_reads_one_seed_or_several_and_refuses_the_rest():
    import argparse

    from devenus.experiments.cli import seed_list

    assert seed_list("0") == [0]
    assert seed_list("1,2") == [1, 2]
    for bad in ("", "1,,2", "a", "1,1", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            seed_list(bad)


FAKE_TRAINER = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    out = Path([a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("trainer.validation_data_dir=")][0])
    out.mkdir(parents=True)
    with open(os.environ["VERL_FILE_LOGGER_PATH"], "w") as f:
        for step in (1, 2, 3, 4):
            f.write(json.dumps({"step": step, "data": {"timing_s/step": 1.0, "devenus/rollouts/generated": 128}}) + "\\n")
    (out.parent / "hydra" / ".hydra").mkdir(parents=True)  # hydra.run.dir: Hydra's copy of the composed config
    (out.parent / "hydra" / ".hydra" / "config.yaml").write_text("data:\\n  n: 4\\nrollout:\\n  n: ${data.n}\\n")
    for step, scores in ((2, {"q1": [1.0, 0.0], "q2": [0.0, 0.0]}), (4, {"q1": [1.0, 1.0], "q2": [1.0, 0.0]})):
        (out / f"{step}.jsonl").write_text("".join(
            json.dumps({"input": f"user\\n{q}\\nassistant", "score": s}) + "\\n" for q, ss in scores.items() for s in ss))
""")


def test_a_run_records_every_validation_point_its_metrics_and_its_provenance(tmp_path, monkeypatch):
    """``val_curve``: accuracy per group at each validation dump (trainer.test_freq), not only the last; and
    what the run was made with: code version, weights, data hashes, config."""
    import hashlib

    from devenus.runs.testbed import RunConfig

    train, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    train.write_bytes(b"train rows")
    val.write_bytes(b"val rows")

    class StandIn(Experiment):
        entry = ("-c", FAKE_TRAINER)

        def _testbed(self):
            return None

        def run_config(self, arm, seed, out, extra=()):
            return RunConfig(seed=seed, train_file=str(train))

        def validation_files(self):
            return {"test_id": val}

        def command(self, tb, out, cfg):
            return [f"trainer.validation_data_dir={out.resolve() / 'validation'}"]

    exp = make(tmp_path)
    exp.__class__ = StandIn
    monkeypatch.setattr("devenus.experiments.runner.question_groups", lambda files: {"q1": "ID", "q2": "ID"})
    rec = exp.run_one("grpo_full", 0)
    assert rec["returncode"] == 0, rec
    assert rec["val_curve"] == [{"step": 2, "ID": 0.25}, {"step": 4, "ID": 0.75}]
    assert rec["accuracy"] == {"ID": 0.75}  # the last point, as before
    assert [c["devenus/rollouts/generated"] for c in rec["curves"]] == [128] * 4
    assert rec["code"] == CODE and rec["base_model"] == MODEL
    sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert rec["data"] == {"train": {"path": str(train), "sha256": sha(train)},
                           "validation": {"test_id": {"path": str(val), "sha256": sha(val)}}}
    assert rec["config"]["run"]["train_file"] == str(train) and rec["config"]["run"]["seed"] == 0
    assert rec["config"]["overrides"] == [f"trainer.validation_data_dir={exp.run_dir('grpo_full', 0).resolve() / 'validation'}"]
    assert rec["config"]["trainer"] == {"data": {"n": 4}, "rollout": {"n": 4}}  # resolved



def test_an_experiment_on_another_model_names_its_data_and_runs_on_that_model(tmp_path):
    # no testbed split to fall back on: train file and validation are required, and the run trains the model named
    with pytest.raises(ValueError, match="names its train_file and validation"):
        Experiment("other", [Arm("a")], {}, results=tmp_path / "r", model="some/model")
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    train, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    exp = Experiment("other", [Arm("a")], {"steps": 2}, results=tmp_path / "r", work=tmp_path / "w",
                     model=str(model), train_file=lambda arm, seed, exp: train, validation={"test_id": val})
    cfg = exp.run_config(exp.arm(BASE), 0, tmp_path / "out")
    assert (cfg.model_dir, cfg.train_file, cfg.val_files, cfg.val_only) == (str(model), str(train), (str(val),), True)
    from devenus.testbed.shipped import model_hash
    assert exp.base_model_id() == model_hash(model)


def test_a_train_file_under_a_relative_work_folder_reaches_the_trainer_absolute(tmp_path, monkeypatch):
    # runs join one shared Ray head whose workers have no working directory: cluster_rules refuses relative paths
    monkeypatch.chdir(tmp_path)
    val = tmp_path / "val.parquet"
    exp = Experiment("rel", [Arm("a")], {"steps": 2}, results=Path("r"), work=Path("outputs/rel"),
                     train_file=lambda arm, seed, exp: exp.work / "data" / "pool.parquet", validation={"test_id": val})
    cfg = exp.run_config(exp.arm("a"), 0, Path("outputs/rel/a_s0"))
    assert cfg.train_file == str(tmp_path / "outputs/rel/data/pool.parquet")


def test_a_held_out_file_in_the_testbed_cache_is_fingerprinted_within_it(tmp_path, monkeypatch):
    # the same run from another home (another cache root) is the same run: committed results stay finished
    prints = []
    for home in ("a", "b"):
        cache = tmp_path / home / ".cache" / "devenus"
        monkeypatch.setenv("DEVENUS_CACHE", str(cache))
        val = cache / "testbed" / "tb-x" / "data" / "test_id.parquet"
        exp = Experiment("v", [Arm("a")], {"steps": 2}, results=tmp_path / "r", work=tmp_path / home / "w",
                         validation={"test_id": val})
        assert exp._validation_id(val) == "$DEVENUS_CACHE/testbed/tb-x/data/test_id.parquet"
        prints.append(exp.fingerprint(exp.arm("a")))
    assert prints[0] == prints[1]
    elsewhere = tmp_path / "elsewhere.parquet"
    assert exp._validation_id(elsewhere) == str(elsewhere)
