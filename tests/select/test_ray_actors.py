"""The Ray Data pool's decisions made before any actor starts: GPU-less actors refused where the Ray
cluster has GPUs, and the paths the actors are given."""

import os

import pytest

from devenus.select.config import load_config
from devenus.select.stages.sharded import _actor_config, gpu_less_actors_error


@pytest.mark.parametrize("actors, actor_gpus, cluster_gpus, refused", [
    (2, 0.0, 8, True),  # the default actor_gpus on a GPU host: every actor would take cuda:0
    (1, 0.0, 1, True),
    (2, 1.0, 8, False),  # GPU actors
    (4, 0.5, 2, False),  # fractional GPU actors
    (2, 0.0, 0, False),  # CPU actors where there are no GPUs (or CUDA_VISIBLE_DEVICES= hides them)
    (0, 0.0, 8, False),  # no actors: the stage runs in this process
])
def test_gpu_less_actors_are_refused_where_there_are_gpus(actors, actor_gpus, cluster_gpus, refused):
    why = gpu_less_actors_error(actors, actor_gpus, cluster_gpus)
    assert (why is not None) == refused
    if refused:
        assert "\n" not in why and f"--actors {actors}" in why and "generate.actor_gpus" in why
        assert "cuda:0" in why and "CUDA_VISIBLE_DEVICES=" in why


def test_actors_get_absolute_paths_and_the_same_config(tmp_path, monkeypatch):
    pool = tmp_path / "pool.parquet"
    pool.write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, {"pool": "pool.parquet", "out": "runs/a", "generate.ray_address": "auto",
                             "score.max_batch_tokens": 4096})
    d = _actor_config(cfg)
    assert d["out"] == str(tmp_path / "runs" / "a") and d["pool"] == str(pool)
    assert os.path.isabs(d["out"]) and os.path.isabs(d["pool"])
    from devenus.select.stages.sharded import _flatten

    back = load_config(None, _flatten(d))  # what an actor loads: the same settings
    assert back.generate == cfg.generate and back.score == cfg.score and back.route == cfg.route
