"""--dedupe exact (issue 22, defect 6): exact repeats of a prompt and its target collapse to the first
row, with the key it has without deduplication; the same prompt with another target is kept and
reported; the summary counts what was read, collapsed and in conflict. DAPO's preparation uses it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from devenus.records import RecordError, import_file, import_raw, import_raw_with_summary, read_records
from devenus.records.cli import main_import
from devenus.records.versions import read_manifest

# each problem repeats: "Same?" three times with one answer, "Other?" twice, "Split?" with two answers
REPEATS = [
    {"question": "Same?", "answer": "1"},
    {"question": "Other?", "answer": "#### 2"},
    {"question": "Same?", "answer": "1"},
    {"question": "Split?", "answer": "3"},
    {"question": "Other?", "answer": "2"},  # the same target once reduced ("#### 2" -> "2")
    {"question": "Split?", "answer": "4"},  # a conflict: kept, reported
    {"question": "Same?", "answer": "1"},
    {"question": "Split?", "answer": "4"},  # repeats the conflicting row exactly: collapsed
]


def write_jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def keys(rows):
    return [r["extra_info"]["index"] for r in rows]


@pytest.mark.parametrize("as_file", [False, True])
def test_exact_repeats_collapse_to_the_first_row_with_its_key(tmp_path, as_file):
    src = write_jsonl(tmp_path / "rep.jsonl", REPEATS) if as_file else REPEATS
    plain = import_raw(src, source="d")
    rows, s = import_raw_with_summary(src, source="d", dedupe="exact")
    assert [(r["extra_info"]["question"], r["reward_model"]["ground_truth"]) for r in rows] == [
        ("Same?", "1"), ("Other?", "2"), ("Split?", "3"), ("Split?", "4")]
    by_pos = dict(enumerate(keys(plain)))
    # the kept rows are records 0, 1, 3 and 5, with exactly the keys they have without --dedupe
    assert keys(rows) == [by_pos[0], by_pos[1], by_pos[3], by_pos[5]]
    assert (s.read, s.duplicates, s.conflicts, s.rows) == (8, 4, 1, 4)
    text = s.describe()
    assert "8 records read, 4 exact repeats collapsed, 1 repeated prompt(s) with another target" in text
    where = "line 6" if as_file else "row 5"
    assert f"{where}: the prompt of {'line 4' if as_file else 'row 3'} with another target ('4')" in text


def test_without_the_flag_every_record_is_a_row():
    rows, s = import_raw_with_summary(REPEATS, source="d")
    assert len(rows) == 8 and s.dedupe is None and "dedupe" not in s.describe()
    with pytest.raises(ValueError, match="dedupe must be one of"):
        import_raw(REPEATS, source="d", dedupe="fuzzy")


def test_dedupe_across_blocks_and_batches_and_in_the_manifest(tmp_path, monkeypatch):
    """Repeats far apart (other blocks, other batches) collapse the same way; the manifest records
    the flag and the records read; an import without the flag keeps its manifest as it was."""
    from devenus.records.importer import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 2048)  # many pyarrow blocks
    recs = [{"question": f"What is {i % 50} + 1?", "answer": str(i % 50 + 1)} for i in range(1000)]
    src = write_jsonl(tmp_path / "many.jsonl", recs)
    s, m = import_file(src, tmp_path / "d.parquet", source="m", dedupe="exact", batch_rows=64, progress=False)
    rows = read_records(tmp_path / "d.parquet")
    assert len(rows) == 50 and (s.read, s.duplicates, s.conflicts) == (1000, 950, 0)
    assert keys(rows) == keys(import_raw(recs[:50], source="m"))
    assert m.config["dedupe"] == "exact" and m.parents[0].rows == 1000
    _, m2 = import_file(src, tmp_path / "all.parquet", source="m", progress=False)
    assert "dedupe" not in read_manifest(tmp_path / "all.parquet").config and m2.output["rows"] == 1000


def test_dedupe_with_ids_drops_repeats_whatever_their_ids(tmp_path):
    recs = [{"id": "a", "question": "Q?", "answer": "1"}, {"id": "b", "question": "Q?", "answer": "1"},
            {"id": "a", "question": "Q?", "answer": "1"}]
    rows, s = import_raw_with_summary(recs, source="i", dedupe="exact")
    assert keys(rows) == ["i/a"] and s.duplicates == 2
    with pytest.raises(RecordError, match="expected a unique id"):  # without it, the repeated id is an error
        import_raw(recs, source="i")


def verl_repeats(path, repeat=3):
    n = 4
    recs = [{"data_source": "math_dapo", "ability": "MATH",
             "prompt": [{"role": "user", "content": f"Solve {i}."}],
             "reward_model": {"style": "rule", "ground_truth": str(i)},
             "extra_info": {"index": f"uuid-{i}-{r}"}} for r in range(repeat) for i in range(n)]
    pd.DataFrame(recs).to_parquet(path)
    return path


def test_the_import_command_takes_the_flag_and_prints_the_counts(tmp_path, capsys):
    src = verl_repeats(tmp_path / "dapo.parquet")
    out = tmp_path / "d0.parquet"
    assert main_import([str(src), "--from-verl", "--dedupe", "exact", "--source", "dapo", "--out", str(out),
                        "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "dedupe exact: 12 records read, 8 exact repeats collapsed, 0 repeated prompt(s)" in text
    assert keys(read_records(out)) == [f"dapo/uuid-{i}-0" for i in range(4)]  # the first of each, its own key


def test_dapo_preparation_collapses_the_repeats(tmp_path, monkeypatch):
    """The recipes' `prepare` imports DAPO with --dedupe exact (run here in-process: the same commands)."""
    from devenus import cli
    from devenus.recipes.gpu import launch

    ran = []
    monkeypatch.setattr(launch, "_devenus", lambda *args: ran.append(args) or cli.main([*args, "--no-progress"]))
    src = verl_repeats(tmp_path / "dapo.parquet", repeat=5)
    launch.prepare(tmp_path / "data", str(src), None, None, None)
    assert "--dedupe" in ran[0] and ran[0][ran[0].index("--dedupe") + 1] == "exact"
    rows = read_records(tmp_path / "data" / "dapo_math17k.parquet")
    assert len(rows) == 4 and len({r["prompt"][0]["content"] for r in rows}) == 4
