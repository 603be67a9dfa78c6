"""The import's column route (``fast_rows``: a block pyarrow read, converted with pyarrow operations)
against its record route (``build_record``, one record at a time): the same Parquet bytes, manifest,
summary and errors, on inputs whose blocks mix what the columns reduce and what they leave to Python."""

from __future__ import annotations

import json
import random

import pytest

from devenus.records import RecordError, import_file
from devenus.records.importer import chunks, columns
from devenus.records.prompts import Example, PromptFormat

WS = ["", " ", "\t", "\u3000", "\x1c"]
PLAIN_Q = ["Tom has {} apples and buys 4 more.", "What is {} times 7?", "A farm sells {} eggs."]
ODD_Q = ["What is \ufb01ve  plus {}?", "\uff26ull width {}", "Tab\tinside {}", "\u00e9migr\u00e9 count {}?",
         "Double  space {}"]
ANSWERS = ["3 + 4 = 7\n#### 7", "#### 2,000", "#### 1,2", "#### 1,234,567.5", "  #### 12  ", "a####b####c",
           "#### \\frac{1}{2}", "#### \u00bd", "so \\boxed{5}", "42", "#### 12\u3000", "#### x9"]


def _records(n, seed, *, ids=None, level=None, subject=False, missing=False):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        # the first half plain ASCII questions (the normal-form check at once), then mixed ones
        pool = PLAIN_Q if i < n // 2 else PLAIN_Q + ODD_Q
        q = rng.choice(pool).format(i if rng.random() < 0.7 else 1)  # (repeats: keys -2, -3, ... across blocks)
        rec = {"question": rng.choice(WS) + q + rng.choice(WS),
               "answer": rng.choice(ANSWERS + (["#### ", None] if missing else []))}
        if ids == "text":
            rec["id"] = rng.choice(WS[:3]) + f"q{i}" + rng.choice(WS[:3])
        elif ids == "int":
            rec["id"] = 1000 - i
        if level == "text":
            rec["level"] = rng.choice(["Level 3", " 2 ", "hard", "level 5"])
        elif level == "int":
            rec["level"] = rng.randint(1, 5)
        if subject:
            rec["subject"] = rng.choice([" Algebra ", "Geometry", "", "\u3000"])
        out.append(rec)
    return out


INPUTS = {
    "hash keys": dict(),
    "text ids, text levels, subjects": dict(ids="text", level="text", subject=True),
    "int ids, int levels": dict(ids="int", level="int"),
    "answers missing": dict(missing=True),
}
OPTIONS = [dict(), dict(labeled="auto"), dict(labeled=False), dict(labeled=False, hidden_answers=False),
           dict(labeled="auto", dedupe="exact"), dict(system_prompt="Be brief.", prompt_template="Q: {question}\nA:"),
           # prompt formats: the registered worked one, it with its system text replaced, and one of a
           # system text and two worked turns (the fixed messages before every row's question)
           dict(prompt_format="smollm2-worked"), dict(prompt_format="smollm2-worked", system_prompt="Be brief."),
           dict(labeled="auto", prompt_format=PromptFormat(
               system="You are exact.", instruction="Q: {question}\nA:",
               examples=(Example("1 + 1?", "\\boxed{2}"), Example("Tom has 3 apples and eats one.", "\\boxed{2}"))))]


def _import(src, out, opts):
    try:
        summary, _ = import_file(src, out, source="c", progress=False, **opts)
    except RecordError as exc:
        return "error", str(exc).replace(str(src), "<in>")
    return summary, out.read_bytes(), out.with_name(out.stem + ".manifest.json").read_text().replace(out.name, "<out>")


def _route_spy():
    """``columns.fast_rows`` wrapped to record, per chunk, whether the column route converted it."""
    fast, converted = columns.fast_rows, []

    def spy(chunk, *args, **kw):
        got = fast(chunk, *args, **kw)
        converted.append(got is not None)
        return got

    return spy, converted


@pytest.mark.parametrize("name", list(INPUTS))
def test_the_column_route_gives_the_record_route_s_version(tmp_path, monkeypatch, name):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=i % 2 == 0) + "\n"
                           for i, r in enumerate(_records(400, seed=len(name), **INPUTS[name]))))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 2048)  # many blocks, each pyarrow's
    spy, converted = _route_spy()

    for i, opts in enumerate(OPTIONS):
        monkeypatch.setattr(columns, "fast_rows", spy)
        converted.clear()
        by_columns = _import(src, tmp_path / f"a{i}.parquet", opts)
        assert sum(converted) >= len(converted) // 2 or by_columns[0] == "error", (opts, converted)
        monkeypatch.setattr(columns, "fast_rows", lambda *a, **k: None)  # every record by build_record
        by_records = _import(src, tmp_path / f"b{i}.parquet", opts)
        assert by_columns == by_records, opts


def test_line_blocks_cover_the_file_in_whole_lines(tmp_path):
    """Each block is whole lines of at most a block's bytes (or begins with a longer line, read to its end),
    the last one what follows the last newline; together they are the file."""
    rng = random.Random(3)
    for trial in range(60):
        lines = [b"x" * rng.choice([0, 1, 5, 40, 300]) for _ in range(rng.randint(0, 30))]
        data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        p = tmp_path / f"f{trial}"
        p.write_bytes(data)
        size = rng.choice([1, 7, 64, 1000])
        with open(p, "rb") as f:
            blocks = list(chunks._line_blocks(f, size))
        assert b"".join(blocks) == data
        assert b"\n" not in blocks[-1]
        for b in blocks[:-1]:
            assert b.endswith(b"\n") and (len(b) <= size or b.index(b"\n") >= size)


@pytest.mark.parametrize("name", ["bom.jsonl", "late.jsonl", "plain.csv"])
def test_the_parent_hash_is_the_input_file_s_read_or_not_by_the_blocks(tmp_path, monkeypatch, name):
    """JSONL is hashed from the blocks as they are read (a BOM, a line longer than a block, no final
    newline, a second pass for a column that starts late); other formats by reading the file again."""
    import hashlib

    from devenus.records.versions import read_manifest, verify_manifest

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 256)
    src = tmp_path / name
    if name == "bom.jsonl":
        src.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps({"question": f"Q{i} " + "x" * (600 if i == 3 else 5),
                                                               "answer": f"#### {i}"}).encode() + b"\n" for i in range(20))[:-1])
    elif name == "late.jsonl":
        src.write_text("".join(json.dumps({"question": f"Q{i}?", **({"answer": str(i)} if i > 30 else {})}) + "\n"
                               for i in range(40)))
    else:
        src.write_text("question,answer\n" + "".join(f"Q{i}?,{i}\n" for i in range(40)))
    _, m = import_file(src, tmp_path / "d.parquet", source="h", labeled="auto", progress=False)
    assert m.parents[0].sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    assert m.parents[0].rows == (20 if name == "bom.jsonl" else 40)
    verify_manifest(tmp_path / "d.parquet", parents=[src])
    assert read_manifest(tmp_path / "d.parquet").parents[0].name == name


def _pad(n, **extra):
    return [json.dumps({"question": f"Pad question {i}?", "answer": str(i), **extra}) for i in range(n)]


def _parquet_bytes(table):
    import io

    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _edge_inputs():
    """Inputs the route-equivalence test above does not reach: each once broke the equivalence."""
    import pyarrow as pa

    two = '{"question": "a?", "answer": "1"} {"question": "b?", "answer": "2"}'  # two objects, one line
    return {
        # pyarrow reads two objects on a line as two rows, an object over two lines as one: with a
        # blank line (or a split object) beside it the rows still number the lines
        "two objects on a line, then a blank line": ("in.jsonl", "\n".join(_pad(30) + [two, ""] + _pad(30)) + "\n"),
        "two objects on a line, then one object on two lines": (
            "in.jsonl", "\n".join(_pad(30) + [two, '{"question": "c?",', '"answer": "3"}'] + _pad(30)) + "\n"),
        "two objects split by a carriage return, then a blank line": (
            "in.jsonl", "\n".join(_pad(30) + [two.replace("} {", "}\r{"), "  "] + _pad(30)) + "\n"),
        # pyarrow infers a timestamp from date-like strings; Python reads them as the strings they are
        "a family column of dates": ("in.jsonl", "\n".join(
            [json.dumps({"question": f"Q{i}?", "answer": str(i), "category": "2021-05-03"}) for i in range(40)]
            + _pad(40, category="algebra")) + "\n"),
        # a block without a value in the id column: those records have no id (an error), not hash keys
        "an id column null or absent in a block": ("in.jsonl", "\n".join(
            _pad(20, id=None) + _pad(20) + [json.dumps({"id": f"k{i}", "question": f"Q{i}?", "answer": str(i)})
                                            for i in range(40)]) + "\n"),
        # CRLF line ends: still one object per line, read by pyarrow
        "CRLF line ends": ("in.jsonl", "".join(line + "\r\n" for line in _pad(40))),
        # a categorical (dictionary-encoded) family column: Python reads its values as str
        "a categorical family column in Parquet": ("in.parquet", _parquet_bytes(pa.table({
            "question": [f"Q{i}?" for i in range(20)], "answer": [str(i) for i in range(20)],
            "subject": pa.array(["algebra", "geometry"] * 10).dictionary_encode()}))),
    }


@pytest.mark.parametrize("name", list(_edge_inputs()))
def test_the_column_route_gives_the_record_route_s_result_on_edge_inputs(tmp_path, monkeypatch, name):
    filename, data = _edge_inputs()[name]
    src = tmp_path / filename
    src.write_bytes(data.encode() if isinstance(data, str) else data)
    spy, converted = _route_spy()

    for chunk_bytes in (chunks.CHUNK_BYTES, 256):  # the whole file in one block, and many blocks
        monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
        for i, opts in enumerate([dict(), dict(labeled="auto"), dict(labeled=False), dict(labeled="auto", dedupe="exact")]):
            monkeypatch.setattr(columns, "fast_rows", spy)
            by_columns = _import(src, tmp_path / f"a{chunk_bytes}-{i}.parquet", opts)
            monkeypatch.setattr(columns, "fast_rows", lambda *a, **k: None)
            by_records = _import(src, tmp_path / f"b{chunk_bytes}-{i}.parquet", opts)
            strip = lambda r: r if r[0] != "error" else (r[0], r[1].replace(str(tmp_path), ""))  # noqa: E731
            assert strip(by_columns) == strip(by_records), (chunk_bytes, opts)
    assert any(converted)  # (the column route did convert blocks of this input)


def test_columns_no_field_is_made_from_are_named_in_one_line_by_both_routes(tmp_path, monkeypatch):
    """An input column that is not a question, answer, id, difficulty, family or choices column is not in the
    output: the summary names it (one line), the same on the column route and the record route."""
    import subprocess
    import sys

    src = tmp_path / "in.jsonl"
    recs = [{"question": f"What is {i}?", "answer": str(i), "source_url": f"http://x/{i}", "notes": None,
             **({"tags": ["a"]} if i % 3 else {})} for i in range(50)]
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 512)
    spy, converted = _route_spy()
    monkeypatch.setattr(columns, "fast_rows", spy)
    by_columns = _import(src, tmp_path / "a.parquet", {})
    assert any(converted)
    monkeypatch.setattr(columns, "fast_rows", lambda *a, **k: None)
    by_records = _import(src, tmp_path / "b.parquet", {})
    assert by_columns == by_records
    s = by_columns[0]
    assert s.not_imported == ("notes", "source_url", "tags")
    lines = [x for x in s.describe().splitlines() if x.startswith("not imported")]
    assert lines == ["not imported: 3 input column(s) no record field is made from: 'notes', 'source_url', 'tags' "
                     "(their values are not in the output)"]
    # every column read: no line
    (tmp_path / "plain.jsonl").write_text("".join(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n"
                                                  for r in recs))
    s = import_file(tmp_path / "plain.jsonl", tmp_path / "c.parquet", source="c", progress=False)[0]
    assert s.not_imported == () and "not imported" not in s.describe()
    # the command prints it
    out = subprocess.run([sys.executable, "-m", "devenus", "import", str(src), "--source", "c", "--out",
                          str(tmp_path / "d.parquet")], capture_output=True, text=True)
    assert out.returncode == 0 and lines[0] in out.stdout.splitlines(), out.stderr


def test_a_verl_files_columns_beyond_its_layout_are_named(tmp_path):
    from devenus.records import import_raw_with_summary, make_row

    rows = [make_row(data_source="t", index=f"k{i}", source="t", question=f"q{i}", ground_truth=str(i)) for i in range(3)]
    for r in rows:
        r["rank"] = 1
    _, s = import_raw_with_summary(rows, source="v", from_verl=True)
    assert s.not_imported == ("rank", "simulation")
