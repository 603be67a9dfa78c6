"""Sandboxed math-verify workers: a template process (zygote) that forks warm workers on demand.

Run as a script (``python _worker.py '<json options>'``), never imported by the parent: it only
needs the standard library, ``math_verify`` and ``devenus.verify.normalize`` (for the decimal policy). The options carry ``ctl_fd``, the zygote's end of
a ``SOCK_SEQPACKET`` socket pair (one message per record).

Zygote (this process), over the control socket:

* startup: it imports math-verify, warms sympy up, then sends ``{"ready": true, "pid": ...}``
  (or ``{"ready": false, "error": ...}``);
* ``{"op": "fork", "id": n}``: it replies ``{"id": n, "pid": p}`` with the parent's end of a
  worker's stream socket attached (``SCM_RIGHTS``); that worker was forked ahead, and the next
  spare is forked after the reply, so a request never waits for a fork;
* ``{"op": "reap", "pid": p}``: the parent is done with worker ``p`` (killed or told to exit); the
  zygote collects it. A worker is never reaped before that, so its pid cannot be reused while the
  parent may still signal it.
* EOF, or the parent gone: the zygote SIGKILLs its remaining workers and exits.

Forking the warm template costs milliseconds; starting a fresh interpreter and importing sympy
costs ~0.7 s of CPU, which a stream of killed workers would otherwise pay once per kill.

Worker, one JSON object per line on its stream socket:

* request:  ``{"id": n, "op": "verify", "a": pred, "b": gold}``
* response: ``{"id": n, "ok": true, "result": bool}`` or ``{"id": n, "ok": false, "error": str}``

The parent enforces the wall-clock bound by killing the worker, so math-verify's own
``signal.alarm`` timeouts are disabled here (``parsing_timeout=None``, ``timeout_seconds=None``).
Ops starting with ``_`` are test hooks (``_sleep``, ``_spin``, ``_crash``) used to simulate hangs.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def _watch_parent(ppid: int) -> None:
    # A worker busy in sympy does not notice EOF on its socket: exit when the zygote is gone.
    while True:
        time.sleep(0.5)
        if os.getppid() != ppid:
            os._exit(0)


def _limit_memory(mb: int) -> None:
    if mb <= 0:
        return
    try:
        import resource

        limit = mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except Exception:  # not fatal: the wall-clock bound still applies
        pass


_WARM_UP = (
    ("0.5", "\\frac{1}{2}"),
    ("x^2+2x+1", "(x+1)^2"),
    ("2\\sqrt{2}", "\\sqrt{8}"),
    ("\\{1,2\\}", "\\{2,1\\}"),
    ("(0,1]", "(0,1]"),
    ("y = 2x+1", "1+2x"),
    ("\\sin^2 x+\\cos^2 x", "1"),
    ("\\log_2 8", "3"),
)


def _make_checker(opts: dict[str, Any]) -> Callable[[str, str], bool]:
    from math_verify import LatexExtractionConfig, parse, verify

    latex_only = [LatexExtractionConfig()]
    # The plain-expression extractor grabs the first number of a string whose LaTeX parse failed
    # ("1+1+...+1" too deep -> "1"), so it is only a fallback for short strings (it reads "50%").
    expr_fallback_max = int(opts.get("expr_fallback_max_chars", 64))
    parse_cache: dict[str, Any] = {}
    cache_max = int(opts.get("parse_cache_size", 4096))

    def parsed(s: str) -> Any:
        hit = parse_cache.get(s)
        if hit is None:
            hit = parse("$" + s + "$", extraction_config=latex_only, parsing_timeout=None)
            if len(s) <= expr_fallback_max and all(isinstance(h, str) for h in hit):
                hit = parse("$" + s + "$", parsing_timeout=None)
            if len(parse_cache) >= cache_max:
                parse_cache.clear()
            parse_cache[s] = hit
        return hit

    float_rounding = int(opts.get("float_rounding", 6))

    def check(pred: str, gold: str) -> bool:
        g, p = parsed(gold), parsed(pred)
        same = bool(
            verify(
                g,
                p,
                float_rounding=float_rounding,
                numeric_precision=int(opts.get("numeric_precision", 15)),
                strict=bool(opts.get("strict", True)),
                timeout_seconds=None,
            )
        )
        if same and g and p:
            return _numbers_agree(g[0], p[0], float_rounding)
        return same

    return check


def _numbers_agree(a: Any, b: Any, float_rounding: int) -> bool:
    """math-verify rounds a float to ``float_rounding`` decimal places, so ``0.0000149`` equals
    ``1.5 \\times 10^{-5}``. Where both sides are constants and one is a float, the verifier's
    own policy decides instead (:func:`devenus.verify.normalize.values_agree`; a constant that is
    not a rational number, such as ``\\sqrt{2}/3``, is taken to 30 digits and can only be
    approximated); anything else keeps math-verify's answer."""
    from fractions import Fraction

    from sympy import Float, Number, Rational

    from devenus.verify.normalize import values_agree

    try:
        a, b = (v.doit() if getattr(v, "is_number", False) and not isinstance(v, Number) else v for v in (a, b))
        if not (getattr(a, "is_number", False) and getattr(b, "is_number", False)):
            return True
        if not (isinstance(a, Float) or isinstance(b, Float)):
            return True

        def exact(v: Any) -> Fraction:
            if isinstance(v, Float):  # str() holds its written digits (15 significant)
                return Fraction(str(v))
            if isinstance(v, Rational):
                return Fraction(int(v.p), int(v.q))
            # an irrational constant: 30 digits, then a tail that never terminates (1/3 of the last)
            return Fraction(str(v.evalf(30))) + Fraction(1, 3 * 10**40)

        return values_agree(exact(a), exact(b), float_rounding)
    except Exception:  # noqa: BLE001 - no policy verdict: math-verify's stands
        return True


def _serve(sock: socket.socket, check: Callable[[str, str], bool]) -> None:
    """A forked worker: answer requests on ``sock`` until EOF."""
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    rfile = sock.makefile("rb")

    def send(obj: dict[str, Any]) -> None:
        sock.sendall(json.dumps(obj).encode() + b"\n")

    while True:
        line = rfile.readline()
        if not line:
            return  # parent closed the socket
        req = json.loads(line)
        rid, op = req.get("id"), req.get("op")
        try:
            if op == "verify":
                result = check(req["a"], req["b"])
            elif op == "ping":
                result = True
            elif op == "_sleep":
                time.sleep(float(req["a"]))
                result = True
            elif op == "_spin":  # CPU-bound hang, like a runaway sympy simplification
                end = time.monotonic() + float(req["a"])
                while time.monotonic() < end:
                    sum(i * i for i in range(1000))
                result = True
            elif op == "_crash":
                os._exit(3)
            else:
                raise ValueError(f"unknown op {op!r}")
            send({"id": rid, "ok": True, "result": bool(result)})
        except (Exception, RecursionError, MemoryError) as e:
            send({"id": rid, "ok": False, "error": f"{type(e).__name__}: {str(e)[:200]}"})


def _fork_worker(ctl: socket.socket, check: Callable[[str, str], bool], children: set[int]) -> tuple[int, socket.socket]:
    """Fork one worker; returns its pid and the parent's end of its socket."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            ctl.close()
            theirs.close()
            _serve(mine, check)
        except BaseException:  # noqa: BLE001 - a worker never returns into the zygote
            code = 1
        finally:
            os._exit(code)
    children.add(pid)
    mine.close()
    return pid, theirs


def _zygote(ctl: socket.socket, check: Callable[[str, str], bool]) -> None:
    """Fork workers on request; single-threaded, so forking it is safe."""
    ppid = os.getppid()
    children: set[int] = set()
    to_reap: set[int] = set()
    poller = select.poll()
    poller.register(ctl, select.POLLIN)
    try:
        # One worker is always forked ahead, so a request is answered without waiting for a fork.
        spare = _fork_spare(ctl, check, children)
        while True:
            events = poller.poll(100 if to_reap else 500)
            if os.getppid() != ppid:
                return  # parent died; EOF may not come if a fork of it holds our peer
            _reap(to_reap, children)
            if not events:
                continue
            try:
                data = ctl.recv(65536)
            except OSError:
                return  # the parent is gone
            if not data:
                return
            msg = json.loads(data)
            if msg.get("op") == "reap":
                pid = int(msg["pid"])
                if pid in children:
                    to_reap.add(pid)
            elif msg.get("op") == "fork":
                spare, parent_alive = _hand_over(ctl, check, children, spare, msg.get("id"))
                if not parent_alive:
                    return
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)  # still unreaped: the pid is certainly ours
            except OSError:
                pass


def _fork_spare(ctl: socket.socket, check: Callable[[str, str], bool],
                children: set[int]) -> tuple[int, socket.socket] | None:
    """The next spare worker; None when the fork fails (retried on the next request)."""
    try:
        return _fork_worker(ctl, check, children)
    except OSError:
        return None


def _reap(to_reap: set[int], children: set[int]) -> None:
    """Collect the workers the parent asked to reap that have exited."""
    for pid in list(to_reap):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            to_reap.discard(pid)
            children.discard(pid)


def _hand_over(ctl: socket.socket, check: Callable[[str, str], bool], children: set[int],
               spare: tuple[int, socket.socket] | None, rid: Any) -> tuple[tuple[int, socket.socket] | None, bool]:
    """Answer fork request ``rid`` with the spare worker (forked now if there is none), then fork the next
    spare off the caller's path. Returns the new spare and whether the parent is still there to serve."""
    if spare is None:
        try:
            spare = _fork_worker(ctl, check, children)
        except OSError as e:  # EAGAIN/ENOMEM: say so, keep serving
            ctl.send(json.dumps({"id": rid, "error": f"fork failed: {e}"}).encode())
            return None, True
    pid, theirs = spare
    try:
        socket.send_fds(ctl, [json.dumps({"id": rid, "pid": pid}).encode()], [theirs.fileno()])
    except OSError:
        return None, False  # the parent is gone (or closed us) before taking the worker
    finally:
        theirs.close()
    return _fork_spare(ctl, check, children), True


def main() -> None:
    opts: dict[str, Any] = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    ctl = socket.socket(fileno=int(opts["ctl_fd"]))
    os.dup2(2, 1)  # stray prints from libraries go to stderr, never onto the parent's stdout
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    _limit_memory(int(opts.get("memory_limit_mb", 0)))
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        check = _make_checker(opts)
        # Warm sympy's lazy imports and caches up once, for every fork: a cold worker takes
        # ~1-2 s for its first polynomial, which would eat most of a check's bound.
        for pred, gold in _WARM_UP:
            check(pred, gold)
        # Workers are forks of this process: keep their garbage collector off the template's
        # objects, or its first pass touches (and copies) every page of the sympy heap.
        gc.freeze()
    except BaseException as e:  # noqa: BLE001 - report anything, then exit
        ctl.send(json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"}).encode())
        return
    ctl.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    _zygote(ctl, check)


if __name__ == "__main__":
    main()
