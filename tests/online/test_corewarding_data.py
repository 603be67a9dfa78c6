"""``devenus data pair-views``: originals merged with their rewrites by pair_key, with errors that name keys."""

import pytest

from devenus.cli import main
from devenus.records import make_row, read_records, write_records
from devenus.records import hide_labels
from devenus.records.pairs import pair_problems, pair_views, pair_with_rewrites


def row(i, view="original", pk=None, **kw):
    idx = f"q{i}" if view == "original" else f"q{i}#{view}"
    return make_row(data_source="t", index=idx, source="t", question=f"{view} {i}", ground_truth=str(i),
                    extra={"pair_key": pk if pk is not None else f"q{i}", "view": view}, **kw)


def test_pair_views_interleaves_in_original_order():
    orig = [row(i) for i in (2, 0, 1)]
    rew = [row(i, "paraphrase") for i in (0, 1, 2)]  # a different order
    out = pair_views(orig, rew)
    assert [r["extra_info"]["index"] for r in out] == ["q2", "q2#paraphrase", "q0", "q0#paraphrase", "q1", "q1#paraphrase"]
    assert pair_problems(out) == []
    assert orig[0]["extra_info"]["view"] == "original"  # inputs untouched (deep copies)


def test_pair_with_rewrites_takes_the_originals_rewrites_and_their_label_state():
    orig = hide_labels([row(i) for i in (3, 1, 2)], 0.5, seed=0)  # some hidden, some labeled
    rew = [row(i, "paraphrase") for i in (0, 1, 2, 3, 4)]  # 0 and 4 have no original here: left out
    out = pair_with_rewrites(orig, rew)
    assert [r["extra_info"]["index"] for r in out] == ["q3", "q3#paraphrase", "q1", "q1#paraphrase", "q2", "q2#paraphrase"]
    state = {r["extra_info"]["index"]: (r["extra_info"]["labeled"], r["reward_model"]["ground_truth"]) for r in out}
    for o in orig:
        i = o["extra_info"]["index"]
        assert state[i + "#paraphrase"][0] == state[i][0]  # a pair is labeled or unlabeled as one
        assert (state[i + "#paraphrase"][1] == "") == (not o["extra_info"]["labeled"])
    assert {state[i][0] for i in ("q1", "q2", "q3")} == {True, False}  # both states exercised
    assert all(r["extra_info"]["labeled"] for r in rew)  # inputs untouched


def test_pair_views_errors_name_the_keys():
    orig = [row(0), row(1), row(2)]
    rew = [row(0, "paraphrase"), row(3, "paraphrase"), row(0, "paraphrase", pk="q0")]
    with pytest.raises(ValueError) as e:
        pair_views(orig, rew)
    msg = str(e.value)
    assert "occur more than once among the rewrites: 'q0'" in msg
    assert "original(s) without a rewrite, pair_key(s): 'q1', 'q2'" in msg
    assert "rewrite(s) without an original, pair_key(s): 'q3'" in msg
    no_key = make_row(data_source="t", index="x", source="t", question="x", ground_truth="1")
    with pytest.raises(ValueError, match="without extra_info.pair_key: 'x'"):
        pair_views([no_key], [])


def test_pair_problems_on_merged_rows():
    assert "no partner row: 'q1'" in " ".join(pair_problems([row(0), row(0, "paraphrase"), row(1)]))
    assert "more than two rows: 'q0'" in " ".join(pair_problems([row(0), row(0, "paraphrase"), row(0, "other")]))


def test_pair_views_command_on_the_testbed(base_testbed, tmp_path, capsys):
    out = tmp_path / "paired.parquet"
    assert main(["data", "pair-views", str(base_testbed.split("train")), str(base_testbed.split("train_paraphrase")),
                 "--out", str(out)]) == 0
    assert "2000 pairs (4000 rows)" in capsys.readouterr().out
    rows = read_records(out)
    assert len(rows) == 4000 and pair_problems(rows) == []
    for a, b in zip(rows[::2], rows[1::2]):
        assert a["extra_info"]["pair_key"] == b["extra_info"]["pair_key"]
        assert (a["extra_info"]["view"], b["extra_info"]["view"]) == ("original", "paraphrase")
        assert a["reward_model"]["ground_truth"] == b["reward_model"]["ground_truth"]
        assert a["prompt"] != b["prompt"]
    # hide-labels keeps the pairing (it only changes label state)
    hidden = tmp_path / "hidden.parquet"
    assert main(["data", "hide-labels", str(out), "--labeled-fraction", "0.1", "--out", str(hidden)]) == 0
    assert pair_problems(read_records(hidden)) == []


def test_pair_views_command_reports_errors(tmp_path, capsys):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_records([row(0), row(1)], a)
    write_records([row(0, "paraphrase")], b)
    assert main(["data", "pair-views", str(a), str(b), "--out", str(tmp_path / "o.parquet")]) == 1
    err = capsys.readouterr().err
    assert "original(s) without a rewrite, pair_key(s): 'q1'" in err
    assert not (tmp_path / "o.parquet").exists()
