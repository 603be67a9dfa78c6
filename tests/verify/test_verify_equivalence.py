"""Equivalence: fast paths, the math-verify workers, and the wall-clock bound.

Worker-backed tests share one module-scoped verifier where they can, because starting the worker
template (fresh interpreter + sympy import) is the expensive part; forking a worker from it is cheap.
"""

import json
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from devenus.verify import Verifier, VerifierConfig, get_default_verifier

# wall-clock bounds: scripts/test.sh runs these on their own, after the parallel unit tests
pytestmark = pytest.mark.timing

TIMEOUT = 1.0
# Generous slack for a slow shared CI box: the bound is TIMEOUT, kill + reap must be quick.
SLACK = 2.0


@pytest.fixture(scope="module")
def verifier():
    """For correctness checks: a generous bound so a loaded machine cannot flip a result.
    numeric_eval is off: these tests must exercise the math-verify worker."""
    v = Verifier(timeout_s=30.0, numeric_eval=False)
    assert v.start(), "worker failed to start"
    yield v
    v.close()


@pytest.fixture(scope="module")
def hv():
    """For hang tests: a short bound."""
    v = Verifier(timeout_s=TIMEOUT, numeric_eval=False)
    assert v.start(), "worker failed to start"
    yield v
    v.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------- fast paths (no worker)
@pytest.fixture()
def no_worker():
    """A verifier whose worker can never start: any symbolic check would count an error."""
    return Verifier(python_executable="/nonexistent/python", startup_timeout_s=2.0)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("5", " 5 ", True),
        ("$\\dfrac{1}{2}$", "\\frac12", True),
        ("0.5", "\\frac{1}{2}", True),
        ("1/2", "0.5", True),
        ("-\\frac{3}{6}", "-0.5", True),
        ("1,000", "1000", True),
        ("x = 3", "3", True),
        ("3", "4", False),
        ("\\frac{1}{3}", "\\frac{1}{4}", False),
        ("100000000000000000001", "100000000000000000000", False),
        # plain decimals: decided here by the decimal policy, never sent to math-verify's rounding
        ("0.333333", "\\frac{1}{3}", True),
        ("0.33", "\\frac{1}{3}", False),
        ("0.0000149", "0.000015", False),
        ("32, 349", "32349", False),  # a list is not a number
    ],
)
def test_fast_paths_need_no_worker(no_worker, a, b, expected):
    assert no_worker.equivalent(a, b) is expected
    s = no_worker.stats
    assert s.mathverify_calls == 0 and s.errors == 0
    assert s.exact_hits + s.numeric_hits == 1


def test_none_empty_and_oversize(no_worker):
    assert not no_worker.equivalent(None, "1")
    assert not no_worker.equivalent("1", "")
    assert not no_worker.equivalent("1" * 20_000, "1" * 20_000)
    assert no_worker.stats.oversize == 1
    assert no_worker.stats.mathverify_calls == 0


def test_failed_worker_start_is_an_error_not_a_crash(no_worker):
    assert no_worker.equivalent("x^2+2x+1", "(x+1)^2") is False  # needs the worker
    assert no_worker.stats.errors == 1


# ---------------------------------------------------------------- math-verify path
@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("\\sqrt{4}", "2", True),
        ("2\\sqrt{2}", "\\sqrt{8}", True),
        # a decimal against a constant expression: the worker applies the decimal policy
        ("0.333333", "\\frac{\\sqrt{1}}{3}", True),
        ("0.33", "\\frac{\\sqrt{1}}{3}", False),
        ("\\{\\sqrt{4},1\\}", "\\{2,1\\}", True),  # an element that is no plain number: past structure.py
        ("x^2+2x+1", "(x+1)^2", True),
        ("\\sqrt{2}", "\\sqrt{3}", False),
        ("y = 2x+1", "1 + 2x", True),
    ],
)
def test_mathverify_path(verifier, a, b, expected):
    before = verifier.stats.mathverify_calls + verifier.stats.cache_hits
    assert verifier.equivalent(a, b) is expected
    after = verifier.stats.mathverify_calls + verifier.stats.cache_hits
    assert after == before + 1


def test_deep_input_is_not_misread(verifier):
    """math-verify's plain-expression fallback reads a too-deep "1+1+...+1" as its first "1"."""
    s0 = verifier.stats
    assert verifier.equivalent("1+" * 1000 + "1", "1") is False
    assert verifier.stats.timeouts == s0.timeouts  # decided, not timed out


def test_pair_cache(verifier):
    a, b = "\\sqrt{9}", "3"
    verifier.equivalent(a, b)
    s0 = verifier.stats
    assert verifier.equivalent(a, b) is True
    s1 = verifier.stats
    assert s1.cache_hits == s0.cache_hits + 1
    assert s1.mathverify_calls == s0.mathverify_calls


def test_mathverify_from_a_thread(verifier):
    """math-verify's own signal.alarm timeout would raise here; our worker does not care."""
    out = {}
    t = threading.Thread(target=lambda: out.update(r=verifier.equivalent("\\sqrt{16}", "4")))
    t.start()
    t.join(30)
    assert out["r"] is True


def test_concurrent_threads(verifier):
    pairs = [("\\sqrt{25}", "5", True), ("\\sqrt{25}", "6", False), ("2^{3}", "8", True)] * 4
    results = [None] * len(pairs)

    def run(i):
        a, b, _ = pairs[i]
        results[i] = verifier.equivalent(a, b)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(pairs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [e for _, _, e in pairs]


# ---------------------------------------------------------------- the wall-clock bound
def _gone(pid: int, within_s: float = 5.0) -> bool:
    """The zygote collects a killed worker shortly after the parent's "reap"."""
    end = time.time() + within_s
    while _alive(pid) and time.time() < end:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("op", ["_sleep", "_spin"])
def test_hang_is_killed_main_thread(hv, op):
    assert hv.start()
    s0 = hv.stats
    pids0 = hv.worker_pids
    assert len(pids0) == 1
    t0 = time.perf_counter()
    assert hv._worker_call(op, "60", "") is None
    elapsed = time.perf_counter() - t0
    assert TIMEOUT <= elapsed < TIMEOUT + SLACK
    s1 = hv.stats
    assert s1.timeouts == s0.timeouts + 1
    assert hv.worker_pids == () and _gone(pids0[0])
    # it works again (a fresh worker) and counts the replacement
    assert hv._worker_call("ping", "", "") is True
    assert hv.stats.worker_restarts == s0.worker_restarts + 1
    assert hv.worker_pids != pids0
    assert hv._worker_call("verify", "\\sqrt{36}", "6") is True


def test_hang_is_killed_from_thread(hv):
    hv.start()
    s0 = hv.stats
    out = {}

    def run():
        t0 = time.perf_counter()
        out["r"] = hv._worker_call("_sleep", "60", "")
        out["dt"] = time.perf_counter() - t0

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert out["r"] is None
    assert out["dt"] < TIMEOUT + SLACK
    assert hv.stats.timeouts == s0.timeouts + 1
    assert hv.equivalent("\\sqrt{49}", "7") is True


def _child_hang(v, q):
    assert v.worker_pids == () and v.zygote_pid is None  # the parent's workers are not ours
    v.start()
    t0 = time.perf_counter()
    r = v._worker_call("_sleep", "60", "")
    dt = time.perf_counter() - t0
    ok = v.equivalent("\\sqrt{64}", "8")
    q.put((r, dt, v.stats.timeouts, ok))
    v.close()


def test_hang_is_killed_in_forked_child(hv):
    hv.start()
    parent_pids = hv.worker_pids + (hv.zygote_pid,)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_hang, args=(hv, q))
    p.start()
    r, dt, timeouts, ok = q.get(timeout=120)
    p.join(30)
    assert r is None and ok is True
    assert dt < TIMEOUT + SLACK
    assert timeouts == hv.stats.timeouts + 1  # the child's counter: inherited + its own
    # the child never touched the parent's workers
    assert hv.worker_pids + (hv.zygote_pid,) == parent_pids and all(_alive(p) for p in parent_pids)
    assert hv.equivalent("\\sqrt{81}", "9") is True


def test_fresh_process_and_clean_exit(tmp_path):
    """A fresh interpreter (like a Ray worker) uses the default hv from a thread, then
    exits without closing it: exit must not hang and the worker must not outlive it."""
    code = textwrap.dedent(
        """
        import json, threading, time
        from devenus.verify import get_default_verifier
        v = get_default_verifier()
        assert v is get_default_verifier()
        v.start()
        out = {}
        def run():
            t0 = time.perf_counter()
            out["r"] = v._worker_call("_spin", "60", "")
            out["dt"] = time.perf_counter() - t0
            out["ok"] = v._worker_call("verify", "\\\\sqrt{4}", "2")
        t = threading.Thread(target=run); t.start(); t.join(120)
        out["timeouts"] = v.stats.timeouts
        out["pids"] = list(v.worker_pids) + [v.zygote_pid]
        print(json.dumps(out))
        """
    )
    env = dict(os.environ, DEVENUS_VERIFY_TIMEOUT_S=str(TIMEOUT), OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["r"] is None and out["dt"] < TIMEOUT + SLACK
    assert out["timeouts"] == 1 and out["ok"] is True
    assert all(_gone(p) for p in out["pids"]), "worker or zygote outlived its parent"
    assert time.perf_counter() - t0 < 120


def test_worker_crash_and_error_are_counted(hv):
    hv.start()
    s0 = hv.stats
    assert hv._worker_call("_crash", "", "") is None
    assert hv.stats.errors == s0.errors + 1
    assert hv._worker_call("no-such-op", "", "") is None  # worker-side exception
    assert hv.stats.errors == s0.errors + 2
    assert hv.equivalent("\\sqrt{100}", "10") is True


def test_worker_killed_while_idle_is_replaced(hv):
    hv.start()
    (pid,) = hv.worker_pids
    os.kill(pid, 9)
    time.sleep(0.2)
    s0 = hv.stats
    assert hv.equivalent("\\sqrt{121}", "11") is True
    assert hv.worker_pids != (pid,)
    assert hv.stats.undecided == s0.undecided


def test_default_verifier_is_a_per_process_singleton():
    v = get_default_verifier()
    assert v is get_default_verifier()
    assert isinstance(v.config, VerifierConfig)


def test_exit_with_a_check_in_flight_does_not_hang():
    """A daemon thread stuck in a 30 s-bounded check must not hold up interpreter exit."""
    code = textwrap.dedent(
        """
        import threading, time
        from devenus.verify import Verifier
        v = Verifier(timeout_s=30.0)
        v.start()
        print(v.worker_pids[0], v.zygote_pid, flush=True)
        threading.Thread(target=v._worker_call, args=("_sleep", "60", ""), daemon=True).start()
        time.sleep(0.5)
        print(time.time(), flush=True)  # exit starts now
        """
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    ended = time.time()
    assert res.returncode == 0, res.stderr
    pid_s, zygote_s, exit_started = res.stdout.split()
    assert ended - float(exit_started) < 10.0  # far below the 30 s bound of the stuck check
    assert _gone(int(pid_s)) and _gone(int(zygote_s))
