"""The one registry helper (devenus.registry): registration, lazy entries, duplicates, did-you-mean."""

import sys
import types

import pytest

from devenus.registry import Registry, RegistryError, where


class Thing:
    pass


class Other:
    pass


def test_register_as_call_and_decorator_and_names_sorted():
    r = Registry("widget")
    r.register("b", Thing)

    @r.register("a")
    class A:
        pass

    assert r.names() == ["a", "b"]
    assert r.get("b") is Thing and r.get("a") is A
    assert "a" in r and "c" not in r


def test_same_entry_twice_is_a_no_op_a_different_one_names_both_places():
    r = Registry("widget")
    r.register("x", Thing)
    r.register("x", Thing)
    with pytest.raises(RegistryError) as e:
        r.register("x", Other)
    msg = str(e.value)
    assert "\n" not in msg
    assert "widget 'x' is registered twice" in msg
    assert where(Thing) in msg and where(Other) in msg


def test_a_lazy_entry_is_imported_on_first_get_only(monkeypatch):
    mod = types.ModuleType("devenus_test_lazy_mod")
    mod.Thing = Thing
    r = Registry("widget", lazy={"lazy": "devenus_test_lazy_mod:Thing"})
    assert r.names() == ["lazy"] and r.path("lazy") == "devenus_test_lazy_mod:Thing"
    monkeypatch.setitem(sys.modules, "devenus_test_lazy_mod", mod)
    assert r.get("lazy") is Thing
    # the class a lazy path names registering itself under that name is the same entry
    r.register("lazy", Thing)
    with pytest.raises(RegistryError, match="registered twice"):
        r.register("lazy", Other)


def test_unknown_name_is_one_line_with_did_you_mean_and_the_known_names():
    r = Registry("router", error=ValueError)
    r.register("ratio", Thing)
    r.register("triage", Other)
    with pytest.raises(ValueError) as e:
        r.get("ratoi")
    assert str(e.value) == "unknown router 'ratoi' (did you mean 'ratio'?); the routers: ratio, triage"
    with pytest.raises(ValueError) as e:
        r.get("zzz")
    assert str(e.value) == "unknown router 'zzz'; the routers: ratio, triage"


def test_the_default_error_is_a_key_error_whose_text_is_the_line():
    r = Registry("pool")
    with pytest.raises(KeyError) as e:
        r.get("nope")
    assert str(e.value) == "unknown pool 'nope'; the pools: none"


def test_check_refuses_an_entry_on_registration_and_on_lazy_import(monkeypatch):
    r = Registry("widget", check=lambda name, e: None if e is Thing else "not a Thing",
                 lazy={"bad": "devenus_test_lazy_mod2:Other"})
    r.register("good", Thing)
    with pytest.raises(ValueError, match="widget 'worse' .*: not a Thing"):
        r.register("worse", Other)
    mod = types.ModuleType("devenus_test_lazy_mod2")
    mod.Other = Other
    monkeypatch.setitem(sys.modules, "devenus_test_lazy_mod2", mod)
    with pytest.raises(ValueError, match="not a Thing"):
        r.get("bad")


def test_unregister_and_empty_name():
    r = Registry("widget")
    r.register("x", Thing)
    r.unregister("x")
    assert r.names() == []
    with pytest.raises(ValueError, match="non-empty name"):
        r.register("", Thing)


def test_two_functions_of_one_name_are_two_entries():
    # lambdas (closures) share module and qualname: a second one under a taken name is still refused
    r = Registry("pool")
    r.register("p", lambda: 1)
    with pytest.raises(RegistryError, match="pool 'p' is registered twice"):
        r.register("p", lambda: 2)


# ---- each registry of the package is on the helper: an unknown name is the same one line -------------
def test_methods_unknown_name():
    from devenus.online import WeakTrainerInterface

    with pytest.raises(KeyError) as e:
        WeakTrainerInterface.get("ttlr")
    assert str(e.value).startswith("unknown DE-Venus method 'ttlr' (did you mean 'ttrl'?); the DE-Venus methods: ")
    assert "ttrl" in str(e.value) and WeakTrainerInterface._methods.path("ttrl").endswith(":TTRL")


def test_rules_unknown_name():
    from devenus.transitions.rules import TransitionError, get

    with pytest.raises(TransitionError, match=r"^unknown rule 'corect' \(did you mean 'correct'\?\); the rules: correct, promote$"):
        get("corect")



def test_sources_unknown_name():
    from devenus.sources import MODELS, POOLS

    with pytest.raises(KeyError, match=r"^unknown pool 'smollm2-pol' \(did you mean 'smollm2-pool'\?\); the pools: "):
        POOLS.get("smollm2-pol")
    with pytest.raises(KeyError, match=r"^unknown model 'testbd' \(did you mean 'testbed'\?\); the models: smollm2, testbed$"):
        MODELS.get("testbd")


def test_signals_unknown_name_and_order():
    from devenus.select.signal_table import DEFAULT_SIGNALS, TABLE

    with pytest.raises(KeyError, match=r"^unknown signal 'entropi' \(did you mean 'entropy'\?\); the signals: accuracy, "):
        TABLE["entropi"]
    # registration order, not sorted: the default score.signals (part of the score stage's identity)
    assert DEFAULT_SIGNALS == ("accuracy", "consistency", "entropy", "self_certainty", "coe_r", "coe_c", "cot_kinetics")


def test_generators_and_backends_unknown_name():
    from devenus.config import ConfigError
    from devenus.generate import BACKENDS, make_backend
    from devenus.generate.hf import HFBackend
    from devenus.select.config import load_config

    with pytest.raises(ConfigError, match=r"^generate.generator: unknown generation backend 'vlm' \(did you mean "
                                          r"'vllm'\?\); the generation backends: hf, vllm \(set it with "
                                          r"--set generate.generator=<value>\)$"):
        load_config(None, {"generate.generator": "vlm"})
    assert BACKENDS.get("hf") is HFBackend
    with pytest.raises(ValueError, match=r"^unknown generation backend 'vlm' \(did you mean 'vllm'\?\); the generation "
                                         r"backends: hf, vllm, auto$"):
        make_backend("vlm", "/nowhere")


def test_forward_signals_are_registered_units():
    from devenus.select.forward import ForwardUnit
    from devenus.select.signal_table import MODEL_SIGNALS, UNITS, Signal, register

    assert UNITS.names() == list(MODEL_SIGNALS)
    for name in MODEL_SIGNALS:  # each unit says which signals it computes in its one pass
        unit = UNITS.get(name)
        assert issubclass(unit, ForwardUnit) and name in unit.names
    with pytest.raises(KeyError, match=r"^unknown forward signal 'coe_x' \(did you mean 'coe_r'\?\)"):
        UNITS.get("coe_x")
    with pytest.raises(ValueError, match="a forward signal names its unit"):
        register(Signal("mine", "forward"))
