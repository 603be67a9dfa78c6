"""devenus.config, the one config mechanism: types, bounds, NaN, nested paths, optionals, unknown keys with a
suggestion, required keys, YAML files and dotted overrides; and every YAML config DE-Venus ships loads
through it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, ClassVar

import pytest

from devenus.config import (Config, ConfigError, apply_overrides, arg_type, config_from_dict, describe,
                            load_config_file, load_file, option, parse_override, section)


class InnerError(ConfigError):
    pass


@dataclass(frozen=True)
class Inner(Config):
    key_path: ClassVar[str] = "outer.inner"

    rate: float = option(0.5, "a rate", gt=0.0, lt=1.0)
    names: tuple[str, ...] = option(("a",), "names", choices=("a", "b", "c"))


@dataclass
class Outer(Config):
    key_path: ClassVar[str] = "outer"

    count: int = option(1, "a count", ge=1)
    flag: bool = option(False, "a flag")
    scale: float = option(1.0, "a scale", ge=0.0, le=10.0)
    label: str = option("x", "a label", choices=("x", "y"))
    cap: int | None = option(None, "an optional cap", ge=0)
    weights: dict[str, float] = option({}, "named weights", ge=0.0)
    extra: dict[str, Any] = option({}, "anything")
    temps: list[float] = option([0.5], "temperatures", gt=0.0, length=1)
    inner: Inner = section(Inner, "a nested section")

    def check(self) -> None:
        if self.cap is not None and self.cap > self.count * 10:
            raise ConfigError(f"{self.key('cap')}={self.cap} must be <= 10 x {self.key('count')}")


@dataclass
class Required(Config):
    error: ClassVar[type[ConfigError]] = InnerError

    out: str = option(help="where outputs go")
    n: int = option(2, "n", ge=0)


def errors(values) -> str:
    with pytest.raises(ConfigError) as e:
        config_from_dict(Outer, values)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_defaults_and_lossless_coercion():
    c = config_from_dict(Outer, {"scale": 2, "temps": [1], "weights": {"a": 1}, "inner": {"names": ["b", "c"]}})
    assert c.scale == 2.0 and isinstance(c.scale, float) and c.temps == [1.0] and c.weights == {"a": 1.0}
    assert c.inner == Inner(0.5, ("b", "c")) and isinstance(c.inner.names, tuple)
    assert config_from_dict(Outer, {}) == Outer() and Outer().temps is not Outer().temps  # no shared default
    assert Outer(inner={"rate": 0.25}).inner.rate == 0.25  # a mapping for a section, also when constructed directly


@pytest.mark.parametrize("values, message", [
    ({"count": True}, "outer.count must be an integer >= 1, got True (set it with `count: <value>` under `outer:`)"),
    ({"count": 1.5}, "outer.count must be an integer >= 1, got 1.5"),
    ({"count": 0}, "outer.count must be an integer >= 1, got 0"),
    ({"flag": 1}, "outer.flag must be a bool (true/false), got 1"),
    ({"flag": "yes"}, "outer.flag must be a bool (true/false), got 'yes'"),
    ({"scale": float("nan")}, "outer.scale must be a finite number >= 0.0 and <= 10.0, got nan"),
    ({"scale": float("inf")}, "outer.scale must be a finite number"),
    ({"scale": "1.0"}, "outer.scale must be a number >= 0.0 and <= 10.0, got '1.0'"),
    ({"scale": 10.5}, "outer.scale must be a number >= 0.0 and <= 10.0, got 10.5"),
    ({"label": "z"}, "outer.label must be one of ['x', 'y'], got 'z'"),
    ({"label": 3}, "outer.label must be a string"),
    ({"cap": -1}, "outer.cap must be an integer >= 0 or null, got -1"),
    ({"weights": {"a": float("nan")}}, "outer.weights must be a mapping of names to a finite number >= 0.0 (a: nan)"),
    ({"weights": [1.0]}, "outer.weights must be a mapping, got [1.0]"),
    ({"weights": {1: 1.0}}, "outer.weights must be a mapping with str keys"),
    ({"temps": 0.5}, "outer.temps must be a list of numbers, got 0.5"),
    ({"temps": [0.5, 1.0]}, "outer.temps must be a list of 1 items"),
    ({"temps": [-1.0]}, "outer.temps must be a list of items each a number > 0.0"),
    ({"temps": [float("nan")]}, "outer.temps must be a list of items each a finite number"),
    ({"inner": {"rate": 1.0}}, "outer.inner.rate must be a number > 0.0 and < 1.0, got 1.0 "
                               "(set it with `rate: <value>` under `outer.inner:`)"),
    ({"inner": {"names": ["a", "d"]}}, "outer.inner.names must be a list of items each one of ['a', 'b', 'c']"),
    ({"inner": 3}, "outer.inner must be a mapping of keys, got 3"),
    ({"cuont": 2}, "unknown key outer.cuont (did you mean outer.count?); the keys of outer: count, flag,"),
    ({"inner": {"rte": 0.1, "zzz": 1}}, "unknown keys outer.inner.rte (did you mean outer.inner.rate?), outer.inner.zzz;"),
    ({"cap": 20}, "outer.cap=20 must be <= 10 x outer.count"),
])
def test_every_bad_value_is_one_line_naming_the_full_key_path(values, message):
    assert message in errors(values)


def test_optionals_take_null_and_any_takes_anything():
    c = config_from_dict(Outer, {"cap": None, "extra": {"k": [1, {"x": None}]}})
    assert c.cap is None and c.extra == {"k": [1, {"x": None}]}


def test_required_keys_and_the_error_class():
    with pytest.raises(InnerError, match=r"out is required: where outputs go \(set it with `out: <value>`\)"):
        config_from_dict(Required, {"n": 1})
    with pytest.raises(InnerError, match="must be a mapping of keys, got list"):
        config_from_dict(Required, [1])
    assert config_from_dict(Required, {"out": "o"}).n == 2


def test_describe_lists_nested_keys_with_their_paths():
    docs = {d.key: d for d in describe(Outer)}
    assert docs["inner.rate"].path == "outer.inner.rate" and docs["inner.rate"].allowed == "> 0.0 and < 1.0"
    assert docs["cap"].type == "int | None" and docs["inner.names"].type == "list[str]"
    assert docs["weights"].type == "dict[str, float]" and docs["label"].allowed == "one of ['x', 'y']"
    assert {d.key: d for d in describe(Required)}["out"].allowed == "required"


def test_yaml_files_are_one_line_errors_naming_the_file(tmp_path):
    p = tmp_path / "c.yaml"
    with pytest.raises(ConfigError, match=f"{p}: no such config file"):
        load_file(p)
    for text, message in (("count: [1\n", "not valid YAML/JSON: expected ',' or ']'"),
                          ("- 1\n", "expected a mapping of config keys, got list"),
                          ("\tcount: 1\n", "not valid YAML/JSON"),
                          ("[" * 5000, "not")):
        p.write_text(text)
        with pytest.raises(ConfigError) as e:
            load_file(p)
        assert str(p) in str(e.value) and message in str(e.value) and "\n" not in str(e.value)
    p.write_text("")
    assert load_file(p) == {}
    p.write_text('{"count": 3, "inner": {"rate": 0.1}}')  # JSON is read the same way
    assert load_config_file(Outer, p).inner.rate == 0.1
    p.write_text("count: 0\n")
    with pytest.raises(ConfigError, match=f"^{p}: outer.count must be an integer >= 1, got 0"):
        load_config_file(Outer, p)


def test_dotted_overrides():
    assert parse_override("inner.rate=0.25") == ("inner.rate", 0.25)
    assert parse_override("names=[a, b]") == ("names", ["a", "b"])
    assert parse_override("scale=1e-5") == ("scale", 1e-5)  # a number, as Hydra reads it (YAML 1.1 says a string)
    assert parse_override("cap=null") == ("cap", None) and parse_override("label=x=y") == ("label", "x=y")
    for bad in ("count", "=3"):
        with pytest.raises(ConfigError, match="expected KEY=VALUE"):
            parse_override(bad)
    base = {"inner": {"rate": 0.1}}
    out = apply_overrides(base, {"inner.names": ["c"], "count": 4})
    assert out == {"inner": {"rate": 0.1, "names": ["c"]}, "count": 4} and base == {"inner": {"rate": 0.1}}
    assert apply_overrides({}, ["inner.rate=0.3", "flag=true"]) == {"inner": {"rate": 0.3}, "flag": True}
    with pytest.raises(ConfigError, match="cannot set count.x: count holds 4, not a section"):
        apply_overrides({"count": 4}, {"count.x": 1})
    with pytest.raises(ConfigError, match="is not a dotted key"):
        apply_overrides({}, {"inner..rate": 1})
    assert load_config_file(Outer, None, ["inner.rate=0.75"]).inner.rate == 0.75


def test_arg_type_checks_a_flag_like_a_key():
    limit, temp = arg_type(int, ge=1), arg_type(float, ge=0.0)
    assert limit("3") == 3 and temp("0") == 0.0
    for parse, text, message in ((limit, "-5", "must be an integer >= 1, got -5"), (limit, "2.5", "must be an integer"),
                                 (temp, "nan", "must be a finite number >= 0.0"), (temp, "inf", "finite")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse(text)


# ----------------------------------------------------------------------------- every shipped YAML config
def _shipped():
    out = []
    for pkg in ("devenus.configs", "devenus.recipes.gpu"):
        root = files(pkg)
        stack = [root]
        while stack:
            d = stack.pop()
            for p in d.iterdir():
                if p.is_dir():
                    stack.append(p)
                elif p.name.endswith(".yaml"):
                    out.append(f"{pkg}:{str(p)[len(str(root)) + 1:]}")
    return sorted(out)


def _load_overlay(name: str, values):
    """The ``devenus`` part of a Hydra config file or of a recipe's overrides, typed; the method's keys too."""
    from devenus.adapters.verl.train import DevenusConfig
    from devenus.online import WeakTrainerInterface
    from devenus.online.config import config_from_dict as method_config

    overlay = config_from_dict(DevenusConfig, values)
    method_config(WeakTrainerInterface.get(overlay.method).method_cls.config_class, overlay.method_config, overlay.method)
    return overlay


def test_every_shipped_yaml_config_loads_through_the_mechanism():
    from devenus.lifecycle.config import load_config as lifecycle_config
    from devenus.recipes.gpu.launch import load_common, load_recipe
    from devenus.select.config import load_config as select_config

    seen = set()
    for entry in _shipped():
        pkg, _, rel = entry.partition(":")
        path = files(pkg) / rel
        if entry == "devenus.configs:agent_loops.yaml":  # verl's agent-loop registry (a list), not a DE-Venus config
            continue
        if pkg == "devenus.configs" and (rel == "devenus_trainer.yaml" or rel.startswith("method/")):
            overlay = _load_overlay(rel, load_file(path)["devenus"])
            if rel.startswith("method/"):
                assert overlay.method == rel[len("method/"):-len(".yaml")]
        elif rel.startswith("lifecycle/"):
            lifecycle_config(path)
        elif rel.startswith("select/"):
            select_config(path)
        elif pkg == "devenus.recipes.gpu":  # a typed Recipe (common.yaml: the shared part), then its devenus keys
            doc = load_common() if rel == "common.yaml" else load_recipe(rel[:-len(".yaml")])
            mine = [o.lstrip("+") for o in doc.overrides if o.lstrip("+").startswith("devenus.")]
            devenus = apply_overrides({}, mine).get("devenus", {})
            if rel != "common.yaml":
                _load_overlay(rel, {"method": doc.method, **devenus})
            else:  # the shared overrides set only where the run goes (every GPU recipe runs on the gpu backend)
                assert devenus == {"backend": "gpu"}
                _load_overlay(rel, {"method": "grpo", **devenus})
        else:
            pytest.fail(f"{entry}: a shipped YAML file with no loader in this test")
        seen.add(entry)
    assert len(seen) >= 30  # the trainer overlay, 12 method files, lifecycle, 15 recipes, select



@dataclass(frozen=True)
class _Turn(Config):
    user: str = option(help="u")
    n: int = option(1, "n", ge=1)


@dataclass(frozen=True)
class _Chat(Config):
    key_path: ClassVar[str] = "chat"
    turns: tuple[_Turn, ...] = option((), "turns")


def test_a_list_of_sections_builds_each_item_and_names_its_index():
    c = config_from_dict(_Chat, {"turns": [{"user": "a"}, {"user": "b", "n": 2}]})
    assert c.turns == (_Turn("a"), _Turn("b", 2))
    for bad, says in (({"turns": [{"user": "a"}, {"user": "b", "n": 0}]}, "chat.turns[1].n must be an integer >= 1, got 0"),
                      ({"turns": [{"usr": "a"}]}, "unknown key chat.turns[0].usr (did you mean chat.turns[0].user?)"),
                      ({"turns": ["a"]}, "chat.turns[0] must be a mapping of keys, got 'a'"),
                      ({"turns": {"user": "a"}}, "chat.turns must be a list")):
        with pytest.raises(ConfigError) as e:
            config_from_dict(_Chat, bad)
        assert str(e.value).startswith(says), str(e.value)
