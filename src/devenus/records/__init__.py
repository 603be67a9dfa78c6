"""DE-Venus persistent records: one Parquet row per sample, readable by verl's RLHFDataset unchanged.

The contract is in ``docs/records.md``. This package does not import verl.
"""

from .importer import (
    DEFAULT_CHOICE_TEMPLATE,
    DEFAULT_PROMPT_TEMPLATE,
    ImportSummary,
    import_raw,
    import_file,
    import_raw_with_summary,
    question_hash,
    read_raw,
    reduce_answer,
)
from .labels import hide_labels
from .io import normalize_rows, read_records, records_to_table, write_records
from .schema import (
    EXTRA_INFO_OPTIONAL,
    EXTRA_INFO_REQUIRED,
    LABEL_SOURCES,
    LABELED_SOURCES,
    METHOD_COLUMNS,
    NOISE_KINDS,
    SIMULATION,
    SIMULATION_FIELDS,
    UNLABELED_SOURCE,
    records_schema,
)
from .rows import make_row, method_view, simulation_view, strip_simulation
from .validate import Issue, RecordError, find_issues, validate_rows

__all__ = [
    "DEFAULT_CHOICE_TEMPLATE",
    "DEFAULT_PROMPT_TEMPLATE",
    "EXTRA_INFO_OPTIONAL",
    "EXTRA_INFO_REQUIRED",
    "ImportSummary",
    "Issue",
    "LABELED_SOURCES",
    "LABEL_SOURCES",
    "METHOD_COLUMNS",
    "NOISE_KINDS",
    "RecordError",
    "SIMULATION",
    "SIMULATION_FIELDS",
    "UNLABELED_SOURCE",
    "find_issues",
    "hide_labels",
    "import_raw",
    "import_file",
    "import_raw_with_summary",
    "make_row",
    "method_view",
    "normalize_rows",
    "question_hash",
    "read_raw",
    "read_records",
    "records_schema",
    "records_to_table",
    "reduce_answer",
    "simulation_view",
    "strip_simulation",
    "validate_rows",
    "write_records",
]
