"""Generate and score on a local Ray Data pool of 2 CPU actors: byte-identical shards to the
single-process run with the same seeds."""

import pytest

pytest.importorskip("ray")

from devenus.select.config import load_config  # noqa: E402
from devenus.select.stages import run_generate, run_score  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.extended]  # the default suite selects in one process (test_pipeline.py)


def test_ray_data_matches_single_process(base_testbed, tmp_path):
    from devenus.testbed.pool import build_pool

    build_pool()
    over = {"limit": 8, "shard_size": 2, "generate.samples": 2, "generate.max_new_tokens": 64}
    single = load_config(None, {**over, "out": str(tmp_path / "single")})
    ray = load_config(None, {**over, "out": str(tmp_path / "ray")})
    mt = base_testbed.load_model()
    run_generate(single, progress=False, model=mt)
    run_score(single, progress=False, model=mt)
    run_generate(ray, progress=False, actors=2)
    run_score(ray, progress=False, actors=2)
    files = sorted(p.relative_to(tmp_path / "single") for p in (tmp_path / "single").rglob("*.parquet"))
    assert len(files) == 4 + 8
    for f in files:
        assert (tmp_path / "ray" / f).read_bytes() == (tmp_path / "single" / f).read_bytes(), f
