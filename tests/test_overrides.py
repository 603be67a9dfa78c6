"""devenus.config.overrides: overrides read as Hydra reads them (its own parser), and written back so that
Hydra reads the same value."""

import pytest

pytest.importorskip("hydra")

from devenus.config.overrides import (OverrideError, hydra_value, last_value, parse_override_line,  # noqa: E402
                                      parse_overrides, set_value)


@pytest.mark.parametrize("line,key,prefix,value", [
    ("a.b=1", "a.b", "", 1),
    ("a.b='0'", "a.b", "", "0"),
    ('a.b="x=y"', "a.b", "", "x=y"),  # a quoted `=` belongs to the value
    ("+a.b=3", "a.b", "+", 3),
    ("++a.b=[console,file]", "a.b", "++", ["console", "file"]),
    ("~a.b", "a.b", "~", None),
    ("~a.b=2", "a.b", "~", 2),
    ("a.b=[1, 2.5, 'c d']", "a.b", "", [1, 2.5, "c d"]),
    ("a.b=null", "a.b", "", None),
    ("a.b=/p/with space", "a.b", "", "/p/with space"),
])
def test_each_form_reads_as_hydra_reads_it(line, key, prefix, value):
    o = parse_override_line(line)
    assert (o.key, o.prefix, o.value, o.line) == (key, prefix, value, line)
    assert o.delete == (prefix == "~")


@pytest.mark.parametrize("line", ["a.b=[1", "a.b=x=y"])  # (an unquoted `=` in a value: Hydra refuses it too)
def test_an_override_hydra_cannot_read_is_one_line_naming_it(line):
    with pytest.raises(OverrideError) as e:
        parse_override_line(line)
    assert str(e.value).startswith(f"override {line!r} is not one Hydra reads: ") and "\n" not in str(e.value)


def test_flags_are_not_overrides_and_the_last_value_wins():
    lines = ["--cfg", "job", "trainer.nnodes=1", "++trainer.nnodes=2", "x=1"]
    assert [o.key for o in parse_overrides(lines[2:])] == ["trainer.nnodes", "trainer.nnodes", "x"]
    assert last_value(lines[2:], "trainer.nnodes") == 2
    assert last_value(["a=1", "~a"], "a", "gone") == "gone"  # a deletion leaves the default
    assert last_value(["a=1"], "b") is None
    assert parse_overrides(["--multirun", "a=1"])[0].key == "a"


def test_set_value_rewrites_the_last_setter_and_keeps_its_prefix():
    assert set_value(["a=1", "++a=2", "b=3"], "a", [1, 2]) == ["a=1", "++a=[1,2]", "b=3"]
    assert set_value(["b=3"], "a", "x") == ["b=3", "a=x"]
    assert set_value(["a=1", "~a"], "a", 5) == ["a=5", "~a"]  # only a line that sets the key is rewritten


@pytest.mark.parametrize("value", ["0", "true", "a,b", "it's", "C:\\dir\\", "/x y/[z]", "x=y", "${oc.env:HOME}",
                                   "ignore::UserWarning:verl.x", "", "plain/path.parquet", 3, 2.5, True, None,
                                   ["a", "b c", 1], {"k": "v w"}])
def test_a_written_value_reads_back_as_itself(value):
    assert parse_override_line(f"k={hydra_value(value)}").value == value


def test_plain_strings_stay_bare_and_others_are_quoted():
    assert hydra_value("/data/math500.parquet") == "/data/math500.parquet"
    assert hydra_value(["console", "file"]) == "[console,file]"
    assert hydra_value("0") == "'0'" and hydra_value("/o x/ckpt") == "'/o x/ckpt'"
