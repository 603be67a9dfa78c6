"""Annotation sources: where the answers of questions routed to ``annotate`` come from.

- ``simulation``: the row's ``simulation.hidden_answer`` (the testbed, or a benchmark whose labels were
  hidden on purpose); the only reader of simulation truth in the selection path.
- ``file:<path>``: a JSONL / CSV / Parquet file with columns ``index`` and ``answer``.
- ``callable:<module>:<function>``: ``function(rows) -> list[str]``, called once with the rows to
  annotate (without their simulation column), returning one answer per row.

Every source must answer every question it is asked about with a non-empty answer, or the
materializer stops with the question's key: a half-annotated version is never written.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Sequence

from devenus.records.rows import method_view


def _read_answer_file(path: Path) -> dict[str, str]:
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    if not path.is_file():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        table = pq.read_table(str(path))
    elif suffix in (".jsonl", ".ndjson", ".json"):
        table = pajson.read_json(str(path))
    elif suffix == ".csv":
        table = pacsv.read_csv(str(path), convert_options=pacsv.ConvertOptions(
            column_types={"index": "string", "answer": "string"}))
    else:
        raise ValueError(f"annotation file {path}: expected .jsonl, .csv or .parquet, got {suffix or 'no suffix'}")
    for col in ("index", "answer"):
        if col not in table.column_names:
            raise ValueError(f"annotation file {path}: expected columns 'index' and 'answer', found {table.column_names}")
    out: dict[str, str] = {}
    for i, (k, a) in enumerate(zip(table.column("index").to_pylist(), table.column("answer").to_pylist())):
        if k is None or a is None:
            raise ValueError(f"annotation file {path}, row {i}: 'index' and 'answer' must not be empty")
        if str(k) in out:
            raise ValueError(f"annotation file {path}, row {i}: duplicate index {k!r}")
        out[str(k)] = str(a)
    return out


def annotation_source(spec: str) -> Callable[[Sequence[dict[str, Any]]], list[str]]:
    """A function ``rows -> answers`` for a source spec (see the module doc)."""
    if spec == "simulation":
        def from_simulation(rows):
            out = []
            for r in rows:
                ans = (r.get("simulation") or {}).get("hidden_answer")
                if ans is None or str(ans).strip() == "":
                    raise ValueError(f"annotation source 'simulation': row {r['extra_info']['index']!r} has no "
                                     "simulation.hidden_answer (use file:<path> or callable:<module>:<fn> for real data)")
                out.append(str(ans))
            return out
        return from_simulation
    if spec.startswith("file:"):
        path = Path(spec[len("file:"):])
        answers = _read_answer_file(path)

        def from_file(rows):
            out = []
            for r in rows:
                k = r["extra_info"]["index"]
                if k not in answers:
                    raise ValueError(f"annotation file {path} has no answer for question {k!r}")
                out.append(answers[k])
            return out
        return from_file
    if spec.startswith("callable:"):
        parts = spec.split(":")
        if len(parts) != 3:
            raise ValueError(f"annotation source {spec!r}: expected callable:<module>:<function>")
        fn = getattr(importlib.import_module(parts[1]), parts[2])

        def from_callable(rows):
            answers = list(fn([method_view(r) for r in rows]))
            if len(answers) != len(rows):
                raise ValueError(f"annotation callable {parts[1]}:{parts[2]} returned {len(answers)} answers for {len(rows)} rows")
            for r, a in zip(rows, answers):
                if a is None or str(a).strip() == "":
                    raise ValueError(f"annotation callable {parts[1]}:{parts[2]} gave no answer for {r['extra_info']['index']!r}")
            return [str(a) for a in answers]
        return from_callable
    raise ValueError(f"unknown annotation source {spec!r}; expected simulation, file:<path> or callable:<module>:<function>")
