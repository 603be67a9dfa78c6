"""Named pools/models resolve through one registry; a model's identity is its weights' content; selectors are
registered routers (the route stage never branches on a name)."""

from __future__ import annotations

import numpy as np
import pytest

from devenus.config import ConfigError
from devenus import sources
from devenus.select.config import load_config
from devenus.select.stages.route import route_scores
from devenus.select.route.router import BUILTIN, Router, get_router, register, router_names


def _folder(tmp_path, weights: bytes):
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(weights)
    return d


def test_a_model_rewritten_in_place_has_another_identity(tmp_path):
    d = _folder(tmp_path, b"a" * 1000)
    first = sources.model_identity(str(d))
    assert first == sources.model_identity(str(d))  # stable
    (d / "model.safetensors").write_bytes(b"b" * 1000)  # same size, same path: new weights
    second = sources.model_identity(str(d))
    assert second["model_sha256"] != first["model_sha256"]


def test_the_stage_identity_holds_the_model_hash(tmp_path):
    from devenus.select.run import SelectionRun

    def generate_identity(cfg):
        run = SelectionRun(cfg)
        run.pool_identity = {"pool": "pool.parquet"}  # the pool's part is the pipeline's own test's
        return run.stage("generate").config

    d = _folder(tmp_path, b"a" * 64)
    cfg = load_config(None, {"generate.model": str(d), "out": str(tmp_path / "run")})
    before = generate_identity(cfg)
    (d / "model.safetensors").write_bytes(b"c" * 64)
    after = generate_identity(cfg)
    assert before["model"]["model_sha256"] != after["model"]["model_sha256"]


def test_a_hub_id_is_identified_by_name_and_a_weightless_folder_is_refused(tmp_path):
    assert sources.model_identity("org/not-a-local-folder") == {"model": "org/not-a-local-folder"}
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .*weight file"):
        sources.model_identity(str(tmp_path / "empty"))


def test_named_sources_register_and_unknown_pools_name_the_known_ones(tmp_path):
    p = tmp_path / "mine.parquet"
    p.write_bytes(b"")
    sources.register_pool("my-pool", lambda: p)
    try:
        assert sources.resolve_pool("my-pool") == p
        with pytest.raises(ValueError, match="pool 'my-pool' is registered twice"):
            sources.register_pool("my-pool", lambda: tmp_path)
    finally:
        sources.POOLS.unregister("my-pool")
    with pytest.raises(FileNotFoundError, match="testbed-pool"):
        sources.resolve_pool(str(tmp_path / "missing.parquet"))
    with pytest.raises(FileNotFoundError, match=r"unknown pool 'testbed-pol' \(did you mean 'testbed-pool'\?\); the pools: "
                                                r"smollm2-pool, testbed-pool"):
        sources.resolve_pool("testbed-pol")
    assert sources.model_names() == ["smollm2", "testbed"]


def test_every_builtin_router_loads_and_checks():
    for name in BUILTIN:
        r = get_router(name)
        assert r.name == name and isinstance(r, Router)
    assert get_router("triage").annotates_while_routing and not get_router("ratio").annotates_while_routing
    with pytest.raises(ConfigError, match="route.selector=interval needs the accuracy signal"):
        load_config(None, {"route.selector": "interval", "score.signals": ["consistency"]})
    with pytest.raises(ConfigError, match="did you mean 'triage'"):
        load_config(None, {"route.selector": "traige"})
    with pytest.raises(ValueError, match=r"^unknown router 'traige' \(did you mean 'triage'\?\); the routers: interval, ratio, triage$"):
        get_router("traige")
    with pytest.raises(ValueError, match="router 'ratio' is registered twice"):
        register(type("Other", (Router,), {"name": "ratio"}))


def test_a_registered_router_is_used_by_the_route_stage():
    @register
    class Everything(Router):
        name = "annotate-all"

        def route(self, inputs, info):
            from devenus.select.route import ANNOTATE

            info["custom"] = True
            return np.full(len(inputs.keys), ANNOTATE, dtype=np.int8), inputs.u

    try:
        assert "annotate-all" in router_names()
        cfg = load_config(None, {"route.selector": "annotate-all"})
        keys = ["a", "b", "c"]
        dec, info = route_scores({"u_consistency": np.array([0.1, 0.5, 0.9])}, keys, cfg)
        from devenus.select.route import ANNOTATE

        assert (dec == ANNOTATE).all() and info["custom"] and info["selector"] == "annotate-all"
        # a router without a config of its own reads the common keys only
        with pytest.raises(ConfigError, match="route.rho_annotate is not a key of the 'annotate-all' router"):
            load_config(None, {"route.selector": "annotate-all", "route.rho_annotate": 0.5})
    finally:
        from devenus.select.route import router

        router.ROUTERS.unregister("annotate-all")


def test_the_signal_table_is_the_one_list_of_signals():
    from pathlib import Path

    from devenus.select import config
    from devenus.select.signal_table import TABLE

    assert config.SIGNALS == tuple(TABLE) and set(config.MODEL_SIGNALS) <= set(TABLE)
    doc = (Path(__file__).parents[2] / "docs" / "selection.md").read_text()
    for name in TABLE:
        assert f"`{name}`" in doc, name
    # a forward signal: sign times the raw score, aggregated; an answer signal: from the answers alone
    se = TABLE["self_certainty"].scores({}, None, np.array([1.0, 3.0]), 2, lambda v: float(v.mean()))
    assert se[0].tolist() == [-1.0, -3.0] and se[1] == -2.0
    acc = TABLE["accuracy"].scores({"rewards": np.array([1.0, 0.0])}, 0.5, None, 2, None)
    assert acc[0].tolist() == [0.0, 1.0] and acc[1] == 0.5
    assert np.isnan(TABLE["accuracy"].scores({"rewards": None}, None, None, 2, None)[1])
