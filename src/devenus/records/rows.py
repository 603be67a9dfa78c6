"""Building records and the method / simulation views of them.

Kept apart from :mod:`.schema` so that the data path stays one-way: ``schema`` (names, types) <-
``validate`` (the checks) <- ``rows`` (builders that validate) <- ``io`` / ``importer``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from .schema import (
    ABILITY,
    DATA_SOURCE,
    EXTRA_INFO,
    EXTRA_INFO_OPTIONAL,
    EXTRA_INFO_REQUIRED,
    PROMPT,
    REWARD_MODEL,
    REWARD_STYLE,
    SIMULATION,
    SIMULATION_FIELDS,
    UNLABELED_SOURCE,
)
from .validate import validate_rows


# ---------------------------------------------------------------------------------------------------
# row builder
# ---------------------------------------------------------------------------------------------------
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
    target = _target(question, prompt, system_prompt, ground_truth, answer)
    if label_source is None:
        label_source = "gold" if labeled is True else UNLABELED_SOURCE

    if question is not None:  # an optional system message, then one user message
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": question})
    else:
        messages = [dict(m) for m in prompt]  # type: ignore[union-attr]

    extra_info = _extra_info(index, labeled, label_source, source, split, question, extra)
    sim = None if simulation is None else {**dict.fromkeys(SIMULATION_FIELDS), **copy.deepcopy(dict(simulation))}

    row = {
        DATA_SOURCE: data_source,
        PROMPT: messages,
        ABILITY: ability,
        REWARD_MODEL: {"style": REWARD_STYLE, "ground_truth": target},
        EXTRA_INFO: extra_info,
        SIMULATION: sim,
    }
    if validate:
        validate_rows([row])
    return row


def _target(question, prompt, system_prompt, ground_truth, answer) -> str:
    """The target ``make_row``'s arguments give ("" for none), after checking they go together."""
    if (question is None) == (prompt is None):
        raise ValueError("make_row: give exactly one of question= or prompt=")
    if prompt is not None and system_prompt is not None:
        raise ValueError("make_row: system_prompt= only applies with question=; put it in prompt=")
    if ground_truth is not None and answer is not None:
        raise ValueError("make_row: give at most one of ground_truth= and answer= (they are aliases)")
    target = ground_truth if ground_truth is not None else answer
    return "" if target is None else target


def _extra_info(index: str, labeled: bool, label_source: str, source: str, split: str, question: str | None,
                extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``extra_info`` of a new row: the required keys, every optional one (None unless given), ``extra``."""
    extra_info: dict[str, Any] = {"index": index, "labeled": labeled, "label_source": label_source,
                                  "source": source, "split": split, **dict.fromkeys(EXTRA_INFO_OPTIONAL)}
    if question is not None:
        extra_info["question"] = question
    for key, value in (extra or {}).items():
        if key in EXTRA_INFO_REQUIRED:
            raise ValueError(f"make_row: extra= may not set the required extra_info key {key!r}; use the keyword")
        extra_info[key] = copy.deepcopy(value)
    return extra_info


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
