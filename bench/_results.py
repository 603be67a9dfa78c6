"""Where a bench script's numbers go: ``bench/results/<name>.json``, with what they were measured on.

    from _results import write_result  # a bench script's own folder is first on sys.path
    write_result("select_signal_auroc", {"args": vars(args), "signals": rows})
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """The CPU model, its cores and the cores this process may use (the machine is shared: each bench adds
    the load average where it reads it)."""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        cpu = ""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {"cpu_model": cpu or platform.processor(), "cores": os.cpu_count(), "usable_cores": usable}


def write_result(name: str, result: dict, results: Path = RESULTS) -> Path:
    """Write ``result`` atomically to ``<results>/<name>.json`` beside the UTC date, the code version
    (:func:`devenus.experiments.provenance.code_version`: commit, dirty flag, package tree) and the
    machine (CPU model, cores, the cores this process may use, load average: the machine is shared)."""
    from devenus.experiments.provenance import code_version
    from devenus.atomic import write_text_atomic

    doc = {"name": name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "code": code_version(),
           "machine": {**machine(), "loadavg": list(os.getloadavg()), "platform": platform.platform()},
           "result": result}
    path = Path(results) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return path
