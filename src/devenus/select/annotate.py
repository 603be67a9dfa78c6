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


def _answer_table(path: Path):
    """An answer file (Parquet, JSONL or CSV) as an Arrow table with ``index`` and ``answer`` columns."""
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
    return table


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
        index, answer = _answer_columns(path)
        answers = dict(zip(index.to_pylist(), answer.to_pylist()))

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


def _blank(col):
    import pyarrow.compute as pc

    from devenus.records.columnar import PY_WHITESPACE

    return pc.fill_null(pc.or_kleene(pc.is_null(col), pc.equal(pc.utf8_length(pc.utf8_trim(col, characters=PY_WHITESPACE)), 0)), True)


def _as_str(col):
    """Values as ``str(value)`` gives them: strings and integers column-wise, anything else one by one."""
    import pyarrow as pa

    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_integer(col.type):
        return col.cast(pa.string())
    return pa.array([None if v is None else str(v) for v in col.to_pylist()], pa.string())


def annotate_table(spec: str, table):
    """Answers (a string array) for the rows of a records table, the questions to annotate: the same
    answers and errors as ``annotation_source(spec)(table.to_pylist())``, column-wise for the
    ``simulation`` and ``file:`` sources (a callable gets the rows, as its contract says)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n == 0:
        return pa.array([], pa.string())
    keys = pc.struct_field(table.column("extra_info"), "index")
    if spec == "simulation":
        sim = table.column("simulation") if "simulation" in table.column_names else None
        if sim is None or not pa.types.is_struct(sim.type) or sim.type.get_field_index("hidden_answer") < 0:
            ans = pa.nulls(n, pa.string())
        else:
            ans = _as_str(pc.struct_field(sim, "hidden_answer"))
        missing = np.flatnonzero(_blank(ans).to_numpy(zero_copy_only=False))
        if missing.size:
            k = keys[int(missing[0])].as_py()
            raise ValueError(f"annotation source 'simulation': row {k!r} has no simulation.hidden_answer "
                             "(use file:<path> or callable:<module>:<fn> for real data)")
        return ans.combine_chunks() if isinstance(ans, pa.ChunkedArray) else ans
    if spec.startswith("file:"):
        path = Path(spec[len("file:"):])
        index, answer = _answer_columns(path)
        pos = pc.index_in(keys, value_set=index)
        missing = np.flatnonzero(pc.is_null(pos).to_numpy(zero_copy_only=False))
        if missing.size:
            raise ValueError(f"annotation file {path} has no answer for question {keys[int(missing[0])].as_py()!r}")
        return answer.take(pos)
    return pa.array(annotation_source(spec)(table.to_pylist()), pa.string())


def _answer_columns(path: Path):
    """``index`` and ``answer`` of an answer file as string arrays (as ``str(value)`` gives them); an empty
    index or answer, or an index an earlier row has, is refused naming the first such row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _answer_table(path)
    raw_index = table.column("index").combine_chunks()
    index, answer = _as_str(raw_index), _as_str(table.column("answer").combine_chunks())
    empty = np.flatnonzero(pc.or_(pc.is_null(index), pc.is_null(answer)).to_numpy(zero_copy_only=False))
    valid = np.flatnonzero(pc.is_valid(index).to_numpy(zero_copy_only=False))
    dup = np.array([], dtype=np.int64)
    if valid.size:
        codes = pc.dictionary_encode(index.take(pa.array(valid))).indices.to_numpy(zero_copy_only=False)
        _, first = np.unique(codes, return_index=True)
        dup = np.setdiff1d(valid, valid[first])  # rows whose index an earlier row has
    # the first offending row decides the message, as when the file is read row by row
    if empty.size and (not dup.size or empty[0] <= dup[0]):
        raise ValueError(f"annotation file {path}, row {int(empty[0])}: 'index' and 'answer' must not be empty")
    if dup.size:
        raise ValueError(f"annotation file {path}, row {int(dup[0])}: duplicate index {raw_index[int(dup[0])].as_py()!r}")
    return index, answer
