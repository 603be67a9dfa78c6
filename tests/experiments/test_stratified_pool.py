"""The stratified training pool: equal counts per mixed pass-rate bin, edges only to fill, seeded."""

import random

import pytest

from devenus.experiments.pool import histogram, stratify


def rows_with(counts: dict[int, int], n: int = 8):
    rows, rates = [], {}
    for k, c in counts.items():
        for i in range(c):
            key = f"q{k}-{i}"
            rows.append({"extra_info": {"index": key}})
            rates[key] = k / n
    return rows, rates


def bins(out, rates, n=8):
    return {k: v for k, v in histogram(out, rates, n).items() if k != "0 or 1"}


def test_equal_counts_per_mixed_bin_and_no_edges_when_the_middle_suffices():
    rows, rates = rows_with({0: 50, 1: 30, 2: 30, 3: 30, 4: 30, 5: 30, 6: 30, 7: 30, 8: 50})
    out = stratify(rows, rates, 70, 8, random.Random(0))
    assert len(out) == 70 and len({r["extra_info"]["index"] for r in out}) == 70
    assert sorted(bins(out, rates).values()) == [10] * 7
    assert histogram(out, rates)["0 or 1"] == 0


def test_a_short_bin_passes_its_quota_on():
    rows, rates = rows_with({1: 2, 2: 40, 3: 40, 4: 40, 5: 40, 6: 40, 7: 40})
    out = stratify(rows, rates, 70, 8, random.Random(0))
    got = bins(out, rates)
    assert got["1/8"] == 2 and len(out) == 70
    assert max(got.values()) - min(v for k, v in got.items() if k != "1/8") <= 1


def test_edges_fill_only_what_the_middle_cannot():
    rows, rates = rows_with({0: 20, 3: 5, 5: 5, 8: 3})
    out = stratify(rows, rates, 20, 8, random.Random(0))
    h = histogram(out, rates)
    assert h["3/8"] == 5 and h["5/8"] == 5 and h.get("0/8") == 10 and "8/8" not in h


def test_the_draw_depends_on_the_seed_only():
    rows, rates = rows_with({k: 30 for k in range(9)})
    a = [r["extra_info"]["index"] for r in stratify(rows, rates, 50, 8, random.Random("x:pool:1"))]
    b = [r["extra_info"]["index"] for r in stratify(list(rows), rates, 50, 8, random.Random("x:pool:1"))]
    c = [r["extra_info"]["index"] for r in stratify(rows, rates, 50, 8, random.Random("x:pool:2"))]
    assert a == b and a != c


def test_a_pool_larger_than_the_split_is_refused():
    rows, rates = rows_with({4: 3})
    with pytest.raises(ValueError, match="pool of 5 needs at least that many rows; the split has 3"):
        stratify(rows, rates, 5, 8, random.Random(0))


def test_a_pool_from_another_file_reads_its_own_cached_pass_rates(tmp_path):
    # the candidate pool's rates are cached beside the testbed under the file's name, apart from the train split's
    import json

    from devenus.experiments.pool import stratified_pool
    from devenus.records.versions import write_version
    from devenus.testbed.pool import PoolConfig, pool_rows

    class Testbed:  # the two things stratified_pool reads of a built testbed
        def split(self, name):
            return tmp_path / "tb" / "data" / f"{name}.parquet"

    rows = pool_rows(config=PoolConfig(size=64))
    cand = tmp_path / "cand" / "pool-x.parquet"
    cand.parent.mkdir()
    write_version(rows, cand, rule="t")
    (tmp_path / "tb").mkdir()
    rates = {r["extra_info"]["index"]: (i % 9) / 8 for i, r in enumerate(rows)}
    (tmp_path / "tb" / "pass_rates_pool-x_n8_s0.json").write_text(json.dumps(rates))
    out, about = stratified_pool("e", Testbed(), 0, 16, file=cand)
    assert len(out) == 16 and all(0 < rates[r["extra_info"]["index"]] < 1 for r in out)
    assert about["zero_variance_share"] == 0 and sum(v for k, v in about["pass_rate_bins"].items() if "/" in k) == 16
    assert [r["extra_info"]["index"] for r in stratified_pool("e", Testbed(), 0, 16, file=cand)[0]] == \
        [r["extra_info"]["index"] for r in out]  # one draw per (experiment, seed)
