"""The selection config on devenus.config: every value a user can type is checked at load, before any
stage runs (bad-input classes 1 and 3 of issue 21), and stage identities stay what earlier runs recorded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devenus.config import ConfigError
from devenus.select.config import load_config


@pytest.mark.parametrize("overrides, message", [
    ({"generate.temperature": float("nan")}, "generate.temperature must be a finite number > 0.0, got nan"),
    ({"generate.temperature": float("inf")}, "generate.temperature must be a finite number"),
    ({"generate.top_p": 1.5}, "generate.top_p must be a number > 0.0 and <= 1.0"),
    ({"route.selector": "interval", "score.signals": ["accuracy", "consistency"], "route.budget": -3}, "route.budget must be an integer >= 1 or null, got -3"),
    ({"route.annotation_budget": -1}, "route.annotation_budget must be an integer >= 0 or null"),
    ({"limit": -5}, "limit must be an integer >= 1 or null, got -5"),
    ({"limit": 2.5}, "limit must be an integer >= 1 or null"),
    ({"generate.samples": True}, "generate.samples must be an integer"),
    ({"route.selector": "triage", "route.window": 0}, "route.window must be an integer >= 1"),
    ({"route.selector": "interval", "score.signals": ["accuracy", "consistency"], "route.low": float("nan"), "route.interval": "custom", "route.high": 1.0}, "route.low must be a finite number >= 0.0 and <= 1.0 or null"),
    ({"route.selector": "interval", "score.signals": ["accuracy", "consistency"], "route.interval": "custom", "route.low": 0.8, "route.high": 0.2}, "route.low=0.8 must be <= route.high=0.2"),
    ({"materialize.annotation": "simulaton"}, "materialize.annotation must be simulation, file:<path> or "
                                              "callable:<module>:<function>, got 'simulaton'"),
    ({"materialize.annotation": "callable:mod"}, "materialize.annotation must be simulation"),
    ({"materialize.annotation": "file:"}, "materialize.annotation must be simulation"),
    ({"route.selecter": "ratio"}, "route.selecter is not a key of the 'ratio' router; its keys: selector, signal, "
                                  "calibrate_sign, seed, min_spread, on_constant_signal, rho_annotate, rho_discard, "
                                  "annotation_budget (did you mean route.selector?)"),
    # a key another router reads does nothing under this one: refused, naming the chosen router's keys
    ({"route.budget": 5}, "route.budget is not a key of the 'ratio' router; its keys: selector, signal"),
    ({"route.selector": "triage", "route.rho_annotate": 0.5}, "route.rho_annotate is not a key of the 'triage' router"),
    ({"route.selector": "ratoi"}, "route.selector: unknown router 'ratoi' (did you mean 'ratio'?); the routers: "
                                  "interval, ratio, triage"),
    ({"score.signals": "entropy"}, "score.signals must be a list"),
    ({"score.max_batch_tokens": 0}, "score.max_batch_tokens must be an integer >= 1 or null, got 0"),
    ({"generate.ray_address": 3}, "generate.ray_address must be a string"),
])
def test_values_out_of_range_are_refused_at_load(overrides, message):
    """Class 1: a value outside what the key allows is one ConfigError naming the key path."""
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_annotation_sources_are_checked_before_the_stages_that_need_them(tmp_path):
    answers = tmp_path / "answers.jsonl"
    cfg = load_config(None, {"materialize.annotation": f"file:{answers}"})  # the spec parses; the file comes later
    with pytest.raises(ConfigError, match=f"the answer file {answers} does not exist"):
        cfg.check_sources()
    answers.write_text(json.dumps({"index": "a", "answer": "1"}) + "\n")
    assert cfg.check_sources() is cfg
    with pytest.raises(ConfigError, match="cannot import no_such_module_here"):
        load_config(None, {"materialize.annotation": "callable:no_such_module_here:f"}).check_sources()
    with pytest.raises(ConfigError, match="json has no function 'nope'"):
        load_config(None, {"materialize.annotation": "callable:json:nope"}).check_sources()
    load_config(None, {"materialize.annotation": "callable:json:dumps"}).check_sources()


@pytest.mark.parametrize("text, message", [
    ("generate:\n  samples: [1\n", "not valid YAML/JSON"),
    ("- a\n- b\n", "expected a mapping of config keys, got list"),
    ("generate:\n  samples: many\n", "generate.samples must be an integer >= 1, got 'many'"),
    ("route: 3\n", "route must be a mapping of keys, got 3"),
])
def test_a_bad_config_file_is_one_line_before_any_stage_runs(tmp_path, text, message):
    """Class 3: bad YAML or a wrong type is one line naming the file and the key, never a traceback; the
    run folder is not even created."""
    path = tmp_path / "select.yaml"
    path.write_text(text)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "devenus.cli", "select", "run", str(path), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], r.stderr
    assert not out.exists()


def test_stage_identities_match_what_earlier_runs_recorded():
    """The identities a run made before this config mechanism wrote in its stage.json (an int where a
    float is declared included): the stage check compares them as JSON values, so they must still match."""
    cfg = load_config(None, {"generate.temperature": 1, "route.selector": "interval", "route.interval": "custom",
                             "route.low": 0, "route.high": 1, "score.signals": ["accuracy", "consistency"]})
    assert cfg.generate_identity() == {"generate": {"model": "testbed", "samples": 8, "temperature": 1,
                                                    "max_new_tokens": 96, "batch_size": 64, "seed": 0}}
    assert cfg.section("route") == {"route": {
        "selector": "interval", "signal": "consistency", "interval": "custom", "low": 0, "high": 1, "budget": None,
        "rho_annotate": 0.293, "rho_discard": 0.421, "annotation_budget": None, "probe_fraction": 0.03,
        "min_probes": 50, "window": None, "isotonic": False, "discard_pass_rate": 0.875,
        "annotate_majority_below": 0.5, "calibrate_sign": False, "seed": 0}}
    # the route identity keeps the keys of the three flat-config routers (the others at their defaults): the fingerprints
    # of unchanged configs are those the flat 17-key route config gave, so earlier run folders resume
    from devenus.select.config import fingerprint

    for overrides, before in [({}, "3fa102897bc0d745"),
                              ({"route.selector": "triage", "score.signals": ["consistency", "entropy"]}, "b8ab0ecca512986c"),
                              ({"route.selector": "interval", "route.budget": 5, "score.signals": ["accuracy", "consistency"]},
                               "c2e0b2ecd14ef167"),
                              ({"route.rho_annotate": 0.1, "route.annotation_budget": 3}, "b0f532c564f2b35f")]:
        assert fingerprint(load_config(None, overrides).section("route")) == before, overrides
    # the memory bound and the Ray address regroup the same work: neither is part of a stage's identity
    other = load_config(None, {"score.max_batch_tokens": 7, "generate.ray_address": "auto"})
    assert other.score_identity() == load_config(None, {"score.max_batch_tokens": None}).score_identity()
    assert other.generate_identity() == load_config(None, {}).generate_identity()
    assert "max_batch_tokens" not in other.score_identity()["score"] and other.score.max_batch_tokens == 7
    assert load_config(None, {}).section("score")["score"]["signals"] == (
        "accuracy", "consistency", "entropy", "self_certainty", "coe_r", "coe_c", "cot_kinetics")


def test_the_shipped_example_loads_and_the_docs_name_it():
    """src/devenus/configs/select/testbed.yaml, the config the README's `devenus select run` line names: a whole
    run on the testbed pool through the mechanism (tests/test_config.py loads every shipped YAML too)."""
    from importlib.resources import files
    from pathlib import Path

    rel = "src/devenus/configs/select/testbed.yaml"
    cfg = load_config(files("devenus.configs") / "select" / "testbed.yaml")
    assert (cfg.pool, cfg.limit, cfg.route.selector, cfg.route.signal) == ("testbed-pool", None, "ratio", "consistency")
    assert cfg.route.signal in cfg.score.signals and cfg.materialize.annotation == "simulation"
    assert load_config(files("devenus.configs") / "select" / "testbed.yaml", {"limit": 64}).limit == 64  # a quick look
    root = Path(__file__).resolve().parents[2]
    assert f"devenus select run {rel}" in (root / "README.md").read_text()
