"""bench/_results.py: a bench's numbers land in one JSON with the code version, the machine and the date."""

import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_write_result_records_code_machine_and_date_beside_the_numbers(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("_results", ROOT / "bench" / "_results.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_results", mod)
    spec.loader.exec_module(mod)
    assert mod.RESULTS == ROOT / "bench" / "results"
    from devenus.experiments.provenance import code_version

    path = mod.write_result("toy", {"rows": [{"signal": "x", "auroc": 0.61}]}, results=tmp_path / "results")
    assert path == tmp_path / "results" / "toy.json"
    doc = json.loads(path.read_text())
    assert doc["result"] == {"rows": [{"signal": "x", "auroc": 0.61}]} and doc["name"] == "toy"
    assert doc["code"] == code_version()  # the experiments' code version: commit, dirty flag, package tree
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["date"])
    m = doc["machine"]
    assert m["cores"] >= 1 and 1 <= m["usable_cores"] <= m["cores"] and len(m["loadavg"]) == 3 and m["cpu_model"]
    assert [p.name for p in path.parent.iterdir()] == ["toy.json"]  # written atomically: no temporary left
