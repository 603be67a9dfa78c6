"""The persistent sample record: field names, label states and the Parquet schema.

One row per sample. The columns are the ones verl's ``RLHFDataset`` reads (``data_source``, ``prompt``,
``ability``, ``reward_model``, ``extra_info``) plus ``simulation``, a separate top-level column for
simulation-only truth (hidden answers, injected noise) that feeds diagnostics and that no method may
read. See ``docs/records.md``.

This module is verl-free and imports only pyarrow (lazily, in :func:`records_schema`); it imports no
other records module (the row builder is in :mod:`.rows`, validation in :mod:`.validate`), so the
package's modules form no import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
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
#: a wrong target the base policy actually produces (active), and the OLR reference's two regimes
#: (docs/methods/olr.md): the unmatchable sentinel target (sentinel), and a wrong answer redrawn online
#: from each step's own rollouts, the sentinel standing in the file (redraw; ``simulation.noise_seed``
#: seeds the draws)
NOISE_KINDS: tuple[str, ...] = ("none", "inactive", "active", "sentinel", "redraw")

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

#: every character ``str.strip()`` removes (``str.isspace``), so that an Arrow trim agrees with Python's
PY_WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


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

    def fields(standard: Mapping[str, type], extras: Mapping[str, Any] | None) -> list:
        return ([pa.field(k, _pa_scalar_type(t)) for k, t in standard.items()]
                + [pa.field(k, extras[k]) for k in sorted(extras or {})])

    columns = [
        pa.field(DATA_SOURCE, pa.string()),
        pa.field(PROMPT, pa.list_(message)),
        pa.field(ABILITY, pa.string()),
        pa.field(REWARD_MODEL, reward_model),
        pa.field(EXTRA_INFO, pa.struct(fields({**EXTRA_INFO_REQUIRED, **EXTRA_INFO_OPTIONAL}, extra_info_extras))),
        pa.field(SIMULATION, pa.struct(fields(SIMULATION_FIELDS, simulation_extras)), nullable=True),
        *(pa.field(k, extra_columns[k]) for k in sorted(extra_columns or {})),
    ]
    return pa.schema(columns, metadata=SCHEMA_METADATA)
