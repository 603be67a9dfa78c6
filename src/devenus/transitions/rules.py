"""Offline rules: what turns one method's proposals into dataset edits, registered by name.

A rule is a :class:`TransitionRule` subclass that lives beside the method that proposes (TraPO v2's
``promote`` in ``online/refine/trapo2.py``, NL-OLR v2's ``correct`` in ``online/refine/nl_olr2.py``). It
names the method whose proposals it applies, its config (the method config's own base class of the keys a
proposal records, so the defaults are declared once), ``check(proposal, row)`` (why the proposal cannot be
applied, reusing the method's online threshold check) and ``apply(table, accepted)`` (the accepted
proposals of a round as one table edit: the new table and its change lines).
:func:`devenus.transitions.build.build_transition` loops over a rule's proposals without knowing which
rule it runs: the rule decides each, the builder writes the version.

Registration: built-in rules are named here by import path (:data:`BUILTIN`), so listing the names (the
CLI's parser) imports no method module (and so no torch); :func:`register` adds a rule class at run time
(a plugin, a test); both on the one registry helper (:mod:`devenus.registry`, :data:`RULES`). Adding a rule = one
module with the class + one line in :data:`BUILTIN` (docs/adding_a_rule.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from devenus.registry import Registry

#: rule name -> "module:Class"; imported on first :func:`get`
BUILTIN: dict[str, str] = {
    "promote": "devenus.online.refine.trapo2:PromoteRule",
    "correct": "devenus.online.refine.nl_olr2:CorrectRule",
}


class TransitionError(ValueError):
    """Inputs a transition refuses as a whole (one line: what, where, what was expected)."""


class TransitionRule:
    """One offline rule; subclasses set the class attributes and implement :meth:`check`."""

    name: ClassVar[str] = ""
    #: the online method whose ``proposal`` evidence rows (``values.rule == name``) this rule applies
    method: ClassVar[str] = ""
    #: a :class:`devenus.online.config.MethodConfig` subclass declared with ``option()`` (bounds included)
    config_class: ClassVar[type] = type(None)
    #: ``extra_info.label_source`` of a row the rule changed
    label_source: ClassVar[str] = ""
    #: what its method writes in a proposal row besides :data:`BASE_PROPOSAL`, name -> :class:`Field` (an
    #: evidence column with ``column=True``, else a key of ``values``); see :meth:`proposal_fields`
    proposal: ClassVar[dict[str, "Field"]] = {}

    def __init__(self, config=None):
        self.config = self.config_class() if config is None else config

    @classmethod
    def proposal_fields(cls) -> dict[str, "Field"]:
        """The schema of this rule's proposal rows: the method checks each proposal it writes against it
        (:func:`devenus.online.refine.method.RefineMethod.propose`) and the builder refuses, before anything is
        written, a proposal row that fails it, naming part, row and field; so a value out of it is corrupt
        evidence, never a rejected proposal, and :meth:`check` decides on values of the declared types."""
        return {**BASE_PROPOSAL, **cls.proposal}

    def check(self, proposal: dict[str, Any], row: dict[str, Any]) -> str | None:
        """Why ``proposal`` cannot be applied to ``row`` (None: it can)."""
        raise NotImplementedError

    def fixable(self, row: dict[str, Any], truth: str, equivalent) -> bool:
        """Whether ``row`` is one the rule is there to fix, given the simulation's hidden answer (recall's
        denominator)."""
        raise NotImplementedError

    def apply(self, table, accepted: dict[int, tuple[dict[str, Any], str]]):
        """(the new table, its change lines): every accepted row (position in ``table`` -> (its proposal,
        the change's why)) gets the proposed answer as its target, labeled, its ``label_source`` this
        rule's, in one table edit of the label vocabulary (:func:`devenus.records.labels.relabel_table`).
        ``table`` is not modified."""
        import numpy as np
        import pyarrow as pa

        from devenus.records.labels import relabel_table

        mask = np.zeros(table.num_rows, dtype=bool)
        answers: list[str | None] = [None] * table.num_rows
        whys: list[str | None] = [None] * table.num_rows
        for i, (proposal, why) in accepted.items():
            mask[i], answers[i], whys[i] = True, proposal["values"]["after"], why
        return relabel_table(table, mask, pa.array(answers, pa.string()), pa.array(whys, pa.string()),
                             self.label_source)

    def summary(self, proposal: dict[str, Any], n: int) -> str:
        """The evidence behind one change, as one sorted JSON line (the manifest's ``why``)."""
        p = proposal
        v = {k: p["values"][k] for k in sorted(p["values"]) if k not in ("after", "before", "field", "rule")}
        return json.dumps({"rule": self.name, "method": p["method"], "round": p["round"], "step": p["step"],
                           "proposals": n, "majority_pass_rate": p["majority_pass_rate"],
                           "target_pass_rate": p["target_pass_rate"], "values": v}, sort_keys=True, allow_nan=False)


# ---------------------------------------------------------------------------------------------------
# a proposal's schema: evidence values are JSON a run wrote, checked against it where written and read
# ---------------------------------------------------------------------------------------------------
RATE = (0.0, 1.0)
#: a least-squares slope of pass rates in [0, 1] over >= 2 evenly spaced points lies in [-1, 1]
SLOPE = (-1.0, 1.0)
#: a margin is a difference of two pass rates
MARGIN = (-1.0, 1.0)


@dataclass(frozen=True)
class Field:
    """One value a proposal records: its type (``number``, ``integer``, ``numbers``: a non-empty list of
    numbers, ``text``), its bounds, whether it is an evidence column (else a key of ``values``), whether
    every proposal has it and whether a text may be blank."""

    kind: str = "number"
    bounds: tuple[float | None, float | None] = (None, None)
    column: bool = False
    required: bool = True
    blank: bool = False

    def problem(self, v: Any) -> str | None:
        """Why ``v`` (present, not None) is not a value of this field (None: it is)."""
        if self.kind == "text":
            if not isinstance(v, str) or (not self.blank and not v.strip()):
                return f"expected a {'' if self.blank else 'non-empty '}str, found {v!r:.40}"
            return None
        if self.kind == "numbers":
            if not isinstance(v, list) or not v:
                return f"expected a non-empty list of numbers, found {v!r:.40}"
            item = Field("number", self.bounds)
            return next((f"{why} (an item of the list)" for why in map(item.problem, v) if why), None)
        lo, hi = self.bounds
        integer = self.kind == "integer"
        if (not isinstance(v, bool) and isinstance(v, int if integer else (int, float)) and math.isfinite(v)
                and (lo is None or v >= lo) and (hi is None or v <= hi)):
            return None
        want = "an integer" if integer else "a finite number"
        rng = f" in [{lo}, {hi}]" if lo is not None and hi is not None else f" >= {lo}" if lo is not None else ""
        return f"expected {want}{rng}, found {v!r:.40}"


#: a non-empty text
TEXT = Field("text")
#: what every rule reads: the rule's name and the proposed answer
BASE_PROPOSAL: dict[str, Field] = {"rule": TEXT, "after": TEXT}


def proposal_problem(fields: dict[str, Field], proposal: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) for the first of ``fields`` the evidence row ``proposal`` does not hold as declared
    (``values.<name>`` for a key of values), or None."""
    values = proposal.get("values") or {}
    for name, f in fields.items():
        v = proposal.get(name) if f.column else values.get(name)
        where = name if f.column else f"values.{name}"
        if v is None:
            if f.required:
                return where, "missing (every proposal of this rule records it)"
            continue
        why = f.problem(v)
        if why:
            return where, why
    return None


# ---------------------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------------------
def _valid(name: str, rule_cls) -> str | None:
    if rule_cls.name != name:
        return f"names itself {rule_cls.name!r}"
    if not rule_cls.method or not dataclasses.is_dataclass(rule_cls.config_class):
        return "a rule needs a name, a method and a dataclass config_class"
    return None


RULES: Registry[type[TransitionRule]] = Registry("rule", error=TransitionError, check=_valid, lazy=BUILTIN)


def register(rule_cls: type[TransitionRule]) -> type[TransitionRule]:
    """Add a rule class under its ``name`` (usable as a decorator); a second class under a taken name is an error."""
    if not rule_cls.name:
        raise ValueError(f"{rule_cls.__qualname__}: a rule needs a name, a method and a dataclass config_class")
    return RULES.register(rule_cls.name, rule_cls)


def unregister(name: str) -> None:
    """Remove a rule added by :func:`register` (tests); a built-in rule stays."""
    if name not in BUILTIN:
        RULES.unregister(name)


def names() -> list[str]:
    """Every registered rule name (imports nothing)."""
    return RULES.names()


def get(name: str) -> type[TransitionRule]:
    """The rule class registered as ``name``; an unknown name is a :class:`TransitionError` with the known ones."""
    return RULES.get(name)


def for_method(method: str) -> list[str]:
    """The rules that apply ``method``'s proposals (imports every rule module)."""
    return [n for n in names() if get(n).method == method]


def method_rules() -> dict[str, str]:
    """method -> its rule, for callers that pair one method with one rule (lifecycle, experiments)."""
    out: dict[str, str] = {}
    for n in names():
        out.setdefault(get(n).method, n)
    return out


# ---------------------------------------------------------------------------------------------------
# a rule's config from --set NAME=VALUE (text) or a YAML mapping (typed values)
# ---------------------------------------------------------------------------------------------------
def rule_config(name: str, values: dict[str, Any] | None = None):
    """The config of rule ``name`` from ``values`` (a YAML mapping, or ``--set`` values parsed as YAML
    scalars); an unknown key, a value of the wrong type, NaN or a value out of bounds is one
    :class:`TransitionError` naming the threshold as the user types it."""
    from devenus.config import ConfigError, config_from_dict

    class AsSet:  # the rule's thresholds are typed as --set NAME=VALUE, not as the method's overrides
        key_path = ""
        error = ConfigError

        @staticmethod
        def override(key: str, value: str = "<value>") -> str:
            return f"--set {key}={value}"

    cls = get(name).config_class
    try:
        return config_from_dict(cls, dict(values or {}), view=AsSet)
    except ConfigError as e:  # a field's check names the --set key; a check across keys, the method's key
        raise TransitionError(f"rule {name!r}: {e}") from None
