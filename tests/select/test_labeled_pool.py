"""A labeled pool (the testbed's train split, 8 questions x 4 samples): accuracy-interval routing keeps
the questions with 0 < p < 1 with their gold labels; ratio routing never replaces a gold label."""

import pytest

from devenus.records import read_records, write_records
from devenus.records.versions import verify_manifest
from devenus.select.config import load_config
from devenus.select.stages import SelectionRun, run_all, run_materialize, run_route
from devenus.select.stages.score import read_questions

pytestmark = pytest.mark.slow


def test_interval_routing_on_a_labeled_pool(base_testbed, tmp_path):
    pool = write_records(read_records(base_testbed.split("train"))[:8], tmp_path / "labeled.parquet")
    over = {"pool": str(pool), "out": str(tmp_path / "run"), "shard_size": 4, "generate.samples": 4,
            "route.selector": "interval", "route.interval": "dapo", "route.signal": "entropy"}
    cfg = load_config(None, over)
    m = run_all(cfg, progress=False, model=base_testbed.load_model())
    verify_manifest(m.output_path)
    q = read_questions(SelectionRun(cfg).stage("score")).to_pydict()
    inside = {k for k, p in zip(q["index"], q["pass_rate"]) if 0 < p < 1}
    rows = read_records(m.output_path)
    assert {r["extra_info"]["index"] for r in rows} == inside
    gold = {r["extra_info"]["index"]: r["reward_model"]["ground_truth"] for r in read_records(pool)}
    for r in rows:
        assert r["extra_info"]["label_source"] == "gold" and r["reward_model"]["ground_truth"] == gold[r["extra_info"]["index"]]
    assert m.config["routing"]["bounds"] == [0.0, 1.0, False, False]
    # re-route the same scores by ratio: annotated rows that had a gold label keep it
    ratio = {k: v for k, v in over.items() if k != "route.interval"}  # the ratio router has no interval key
    cfg2 = load_config(None, {**ratio, "route.selector": "ratio", "route.rho_annotate": 0.5, "route.rho_discard": 0.25,
                              "materialize.out": str(tmp_path / "ratio.parquet")})
    run_route(cfg2, force=True, progress=False)
    m2 = run_materialize(cfg2, progress=False)
    rows2 = read_records(m2.output_path)
    assert m2.config["routing"]["counts"] == {"discard": 2, "weak": 2, "annotate": 4, "keep": 0}
    for r in rows2:
        if r["extra_info"]["labeled"]:
            assert r["extra_info"]["label_source"] == "gold" and r["reward_model"]["ground_truth"] == gold[r["extra_info"]["index"]]
        else:
            assert r["reward_model"]["ground_truth"] == "" and r["simulation"]["hidden_answer"] == gold[r["extra_info"]["index"]]
    assert sum(r["extra_info"]["labeled"] for r in rows2) == 4
