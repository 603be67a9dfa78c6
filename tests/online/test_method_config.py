"""Typed method configs: one declaration per key, one validation, one spelling in every message."""

import argparse

import pytest

from devenus.online import WeakTrainerInterface
from devenus.online.cli import add_parser, describe_method, list_methods
from devenus.online.config import ConfigError, config_from_dict, describe
from devenus.online.supervise.ttrl import TTRLConfig


def build(name, **cfg):
    return WeakTrainerInterface.get(name).build(cfg)


def test_an_unknown_key_names_the_override_to_type():
    with pytest.raises(ConfigError) as e:
        build("ttrl", min_agreemnt=0.5)
    msg = str(e.value)
    assert "+devenus.method_config.min_agreemnt=<value>" in msg
    assert "did you mean +devenus.method_config.min_agreement=<value>?" in msg
    assert "devenus methods ttrl" in msg


@pytest.mark.parametrize("name, cfg, text", [
    ("ttrl", {"min_agreement": 1.5}, "devenus.method_config.min_agreement must be a number >= 0.0 and <= 1.0, got 1.5"),
    ("ttrl", {"votes": 2.5}, "devenus.method_config.votes must be an integer"),
    ("ttrl", {"vote_temperatures": 0.6}, "vote_temperatures must be a list"),
    ("ttrl", {"vote_temperatures": [0.6, -1]}, "list of items each a number >= 0.0"),
    ("emrl", {"variant": "tokens"}, "devenus.method_config.variant must be one of ['token_entropy'"),
    ("corewarding", {"use_partner_label": "yes"}, "use_partner_label must be a bool"),
    ("corewarding2", {"alpha_start": 0.001, "alpha_end": 0.01}, "alpha_end=0.01 > devenus.method_config.alpha_start"),
    ("unsupervised", {"verdicts": ["yes"]}, "verdicts must be a list of 2 items"),
    ("unsupervised", {"w_entropy": float("nan")}, "w_entropy must be a finite number"),
])
def test_bad_values_name_the_key_path_and_the_method(name, cfg, text):
    with pytest.raises(ConfigError) as e:
        build(name, **cfg)
    assert text in str(e.value) and f"method {name!r}" in str(e.value)


def test_values_are_coerced_only_where_lossless():
    cfg = config_from_dict(TTRLConfig, {"min_agreement": 1, "vote_temperatures": [1, 0.5]}, "ttrl")
    assert cfg.min_agreement == 1.0 and isinstance(cfg.min_agreement, float)
    assert cfg.vote_temperatures == [1.0, 0.5] and all(isinstance(t, float) for t in cfg.vote_temperatures)
    assert TTRLConfig().vote_temperatures is not TTRLConfig().vote_temperatures  # no shared mutable default


@pytest.mark.parametrize("name", WeakTrainerInterface.names())
def test_every_key_of_every_method_has_a_type_and_help(name):
    for k in describe(WeakTrainerInterface.get(name).method_cls.config_class):
        assert k.help and k.type in ("bool", "int", "float", "str", "list[float]", "list[str]")
        assert k.path == f"devenus.method_config.{k.key}"


def test_devenus_methods_lists_methods_and_keys(capsys):
    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers())
    for argv in (["methods"], ["methods", "ttrl"]):
        args = p.parse_args(argv)
        assert args.fn(args) == 0
    out = capsys.readouterr().out
    for name in WeakTrainerInterface.names():
        assert name in out
    for k in describe(WeakTrainerInterface.get("ttrl").method_cls.config_class):
        assert k.path in out and k.help in out
    assert "S_y" in list_methods() and "EMATeacherTrainer" in list_methods()
    assert "+devenus.method_config.min_agreement=0.0" in describe_method("ttrl")
    args = p.parse_args(["methods"])  # the bare command lists every method's keys too
    assert args.fn(args) == 0
    out = capsys.readouterr().out
    for name in WeakTrainerInterface.names():
        for k in describe(WeakTrainerInterface.get(name).method_cls.config_class):
            assert k.path in out and k.help in out, (name, k.key)
    args = p.parse_args(["methods", "nope"])
    with pytest.raises(ValueError, match="unknown method 'nope'; registered: corewarding"):
        args.fn(args)
