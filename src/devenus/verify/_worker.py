"""Sandboxed math-verify worker: a separate interpreter that answers equivalence checks.

Run as a script (``python _worker.py '<json options>'``), never imported by the parent: it only
needs the standard library and ``math_verify``. Protocol: one JSON object per line.

* startup: the worker writes ``{"ready": true, "pid": ...}`` (or ``{"ready": false, "error": ...}``)
* request:  ``{"id": n, "op": "verify", "a": pred, "b": gold}``
* response: ``{"id": n, "ok": true, "result": bool}`` or ``{"id": n, "ok": false, "error": str}``

The parent enforces the wall-clock bound by killing this process, so math-verify's own
``signal.alarm`` timeouts are disabled here (``parsing_timeout=None``, ``timeout_seconds=None``).
Ops starting with ``_`` are test hooks (``_sleep``, ``_spin``, ``_crash``) used to simulate hangs.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any


def _watch_parent(ppid: int) -> None:
    # A worker busy in sympy does not notice EOF on stdin: exit when the parent is gone.
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


def main() -> None:
    opts: dict[str, Any] = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    # Keep the protocol channel private: stray prints from libraries go to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business

    def send(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    _limit_memory(int(opts.get("memory_limit_mb", 0)))
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    try:
        from math_verify import LatexExtractionConfig, parse, verify

        latex_only = [LatexExtractionConfig()]
        # The plain-expression extractor grabs the first number of a string whose LaTeX parse
        # failed ("1+1+...+1" too deep -> "1"), so it is only a fallback for short strings
        # (it is what reads "50%").
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

        def check(pred: str, gold: str) -> bool:
            return bool(
                verify(
                    parsed(gold),
                    parsed(pred),
                    float_rounding=int(opts.get("float_rounding", 6)),
                    numeric_precision=int(opts.get("numeric_precision", 15)),
                    strict=bool(opts.get("strict", True)),
                    timeout_seconds=None,
                )
            )

        check("0.5", "\\frac{1}{2}")  # warm up sympy's lazy imports before saying ready
    except BaseException as e:  # noqa: BLE001 - report anything, then exit
        send({"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    send({"ready": True, "pid": os.getpid()})

    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return  # parent closed the pipe
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


if __name__ == "__main__":
    main()
