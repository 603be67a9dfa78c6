"""The persistent sample record: field names, label states, the Parquet schema and a row builder.

One row per sample. The columns are the ones verl's ``RLHFDataset`` reads (``data_source``, ``prompt``,
``ability``, ``reward_model``, ``extra_info``) plus ``simulation``, a separate top-level column for
simulation-only truth (hidden answers, injected noise) that feeds diagnostics and that no method may
read. See ``docs/records.md``.

This module is verl-free and imports only pyarrow (lazily, in :func:`records_schema`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

# ---------------------------------------------------------------------------------------------------
# field names
# ---------------------------------------------------------------------------------------------------
DATA_SOURCE = "data_source"
PROMPT = "prompt"
ABILITY = "ability"
REWARD_MODEL = "reward_model"
EXTRA_INFO = "extra_info"
SIMULATION = "simulation"

#: the columns every row has, in file order (``simulation`` may be null)
COLUMNS: tuple[str, ...] = (DATA_SOURCE, PROMPT, ABILITY, REWARD_MODEL, EXTRA_INFO, SIMULATION)
#: the columns a method may see (everything but ``simulation``)
METHOD_COLUMNS: tuple[str, ...] = (DATA_SOURCE, PROMPT, ABILITY, REWARD_MODEL, EXTRA_INFO)

REWARD_STYLE = "rule"
ROLES: tuple[str, ...] = ("system", "user", "assistant")

#: where the current target came from. ``none`` <=> the row is unlabeled.
LABEL_SOURCES: tuple[str, ...] = ("gold", "annotated", "promoted", "corrected", "none")
UNLABELED_SOURCE = "none"
#: label sources a labeled row may carry
LABELED_SOURCES: tuple[str, ...] = tuple(s for s in LABEL_SOURCES if s != UNLABELED_SOURCE)

#: ``simulation.noise`` values: no noise, a wrong target the policy never produces (inactive),
#: a wrong target the base policy actually produces (active)
NOISE_KINDS: tuple[str, ...] = ("none", "inactive", "active")

#: extra_info keys every row must carry, with their python type
EXTRA_INFO_REQUIRED: dict[str, type] = {
    "index": str,
    "labeled": bool,
    "label_source": str,
    "source": str,
    "split": str,
}
#: optional task metadata with a fixed type; always present in written rows (None when unknown)
EXTRA_INFO_OPTIONAL: dict[str, type] = {
    "difficulty": int,
    "family": str,
    "view": str,
    "pair_key": str,
    "question": str,
}
EXTRA_INFO_STANDARD: tuple[str, ...] = tuple(EXTRA_INFO_REQUIRED) + tuple(EXTRA_INFO_OPTIONAL)

#: simulation keys with a fixed type; always present in a non-null simulation struct
SIMULATION_FIELDS: dict[str, type] = {
    "hidden_answer": str,
    "noise": str,
}

#: keys a ``reward_model`` struct has (no others: the written schema would drop them)
REWARD_MODEL_FIELDS: tuple[str, ...] = ("style", "ground_truth")
#: keys a chat message has
MESSAGE_FIELDS: tuple[str, ...] = ("role", "content")

SCHEMA_METADATA = {b"devenus.records": b"1"}


# ---------------------------------------------------------------------------------------------------
# pyarrow schema
# ---------------------------------------------------------------------------------------------------
def _pa_scalar_type(py_type: type):
    import pyarrow as pa

    return {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}[py_type]


def records_schema(
    extra_info_extras: Mapping[str, Any] | None = None,
    simulation_extras: Mapping[str, Any] | None = None,
    extra_columns: Mapping[str, Any] | None = None,
):
    """The explicit pyarrow schema of a records file.

    The standard fields always have the same types, whatever the rows hold (an all-None column is
    still a string/int column). Extra metadata keys (``extra_info_extras``: name -> pyarrow type,
    likewise for ``simulation`` and for extra top-level columns) are appended in sorted order.
    """
    import pyarrow as pa

    message = pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())])
    reward_model = pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())])
    extra_fields = [pa.field(k, _pa_scalar_type(t)) for k, t in EXTRA_INFO_REQUIRED.items()]
    extra_fields += [pa.field(k, _pa_scalar_type(t)) for k, t in EXTRA_INFO_OPTIONAL.items()]
    for k in sorted(extra_info_extras or {}):
        extra_fields.append(pa.field(k, extra_info_extras[k]))
    sim_fields = [pa.field(k, _pa_scalar_type(t)) for k, t in SIMULATION_FIELDS.items()]
    for k in sorted(simulation_extras or {}):
        sim_fields.append(pa.field(k, simulation_extras[k]))
    fields = [
        pa.field(DATA_SOURCE, pa.string()),
        pa.field(PROMPT, pa.list_(message)),
        pa.field(ABILITY, pa.string()),
        pa.field(REWARD_MODEL, reward_model),
        pa.field(EXTRA_INFO, pa.struct(extra_fields)),
        pa.field(SIMULATION, pa.struct(sim_fields), nullable=True),
    ]
    for k in sorted(extra_columns or {}):
        fields.append(pa.field(k, extra_columns[k]))
    return pa.schema(fields, metadata=SCHEMA_METADATA)


# ---------------------------------------------------------------------------------------------------
# row builder
# ---------------------------------------------------------------------------------------------------
def build_prompt(question: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """Chat messages for a plain question: an optional system message, then one user message."""
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": question})
    return messages


def make_row(
    *,
    data_source: str,
    index: str,
    source: str,
    question: str | None = None,
    prompt: Iterable[Mapping[str, str]] | None = None,
    ground_truth: str | None = None,
    answer: str | None = None,
    labeled: bool = True,
    label_source: str | None = None,
    split: str = "train",
    ability: str = "math",
    system_prompt: str | None = None,
    extra: Mapping[str, Any] | None = None,
    simulation: Mapping[str, Any] | None = None,
    validate: bool = True,
) -> dict[str, Any]:
    """Build one record.

    Give either ``question`` (a user message is built, after ``system_prompt`` when given) or
    ``prompt`` (chat messages, used as they are). ``answer`` is an alias of ``ground_truth``; the
    target defaults to ``""``. ``label_source`` defaults to ``"gold"`` for labeled rows and ``"none"``
    for unlabeled ones. ``extra`` adds task metadata to ``extra_info`` (``difficulty``, ``family``,
    ``view``, ``pair_key``, ``question`` or any other scalar key; it may not override the required
    keys). ``simulation`` is the simulation-only truth (``hidden_answer``, ``noise``) or None for real
    data. With ``validate`` (default) the row is checked against the contract and a
    :class:`~devenus.records.validate.RecordError` is raised if it breaks it.
    """
    if (question is None) == (prompt is None):
        raise ValueError("make_row: give exactly one of question= or prompt=")
    if prompt is not None and system_prompt is not None:
        raise ValueError("make_row: system_prompt= only applies with question=; put it in prompt=")
    if ground_truth is not None and answer is not None:
        raise ValueError("make_row: give at most one of ground_truth= and answer= (they are aliases)")
    target = ground_truth if ground_truth is not None else answer
    if target is None:
        target = ""
    if label_source is None:
        label_source = "gold" if labeled is True else UNLABELED_SOURCE

    if question is not None:
        messages = build_prompt(question, system_prompt)
    else:
        messages = [dict(m) for m in prompt]  # type: ignore[union-attr]

    extra_info: dict[str, Any] = {
        "index": index,
        "labeled": labeled,
        "label_source": label_source,
        "source": source,
        "split": split,
    }
    for key in EXTRA_INFO_OPTIONAL:
        extra_info[key] = None
    if question is not None:
        extra_info["question"] = question
    for key, value in (extra or {}).items():
        if key in EXTRA_INFO_REQUIRED:
            raise ValueError(f"make_row: extra= may not set the required extra_info key {key!r}; use the keyword")
        extra_info[key] = copy.deepcopy(value)

    sim = None
    if simulation is not None:
        sim = {k: None for k in SIMULATION_FIELDS}
        sim.update(copy.deepcopy(dict(simulation)))

    row = {
        DATA_SOURCE: data_source,
        PROMPT: messages,
        ABILITY: ability,
        REWARD_MODEL: {"style": REWARD_STYLE, "ground_truth": target},
        EXTRA_INFO: extra_info,
        SIMULATION: sim,
    }
    if validate:
        from .validate import validate_rows

        validate_rows([row])
    return row


# ---------------------------------------------------------------------------------------------------
# the method view: rows without simulation truth
# ---------------------------------------------------------------------------------------------------
def method_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of one row without the ``simulation`` column: what a method may see.

    Methods build their inputs through this (or :func:`strip_simulation`), so simulation truth
    cannot leak into a decision; mutating the view does not touch the original row.
    """
    return {k: copy.deepcopy(v) for k, v in row.items() if k != SIMULATION}


def strip_simulation(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Deep copies of ``rows`` without the ``simulation`` column (see :func:`method_view`)."""
    return [method_view(r) for r in rows]


def simulation_view(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``extra_info.index`` -> simulation struct, for rows that have one. Diagnostics only."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        sim = r.get(SIMULATION)
        if sim is not None:
            out[r[EXTRA_INFO]["index"]] = copy.deepcopy(dict(sim))
    return out
