"""``devenus import``: raw question/answer data -> a validated records Parquet file.

:func:`add_import_arguments` + :func:`run_import` let the main CLI mount this as a subcommand;
:func:`main_import` is the standalone entry (``python -m devenus.records.cli``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .importer import import_raw_with_summary
from .io import write_records
from .validate import RecordError

_LABELED = {"true": True, "false": False, "auto": "auto"}


def add_import_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the import command's arguments to ``parser``."""
    parser.add_argument("input", help="raw data: .jsonl/.ndjson, .json, .csv/.tsv or .parquet")
    parser.add_argument("--out", "-o", required=True, help="records Parquet file to write")
    parser.add_argument("--source", help="provenance name, prefixes every key (default: input file stem)")
    parser.add_argument("--data-source", help="data_source column, picks the scorer (default: --source)")
    parser.add_argument("--split", default="train", help="split name (default: train)")
    parser.add_argument("--ability", default="math", help="ability column (default: math)")
    parser.add_argument("--question-field", help="question column (default: auto-detect)")
    parser.add_argument("--answer-field", help="answer column (default: auto-detect)")
    parser.add_argument(
        "--id-field",
        help="id column for keys (default: auto-detect; 'none' = always use question hashes)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--labeled", choices=sorted(_LABELED), default="true",
        help="true: every row needs an answer; auto: labeled iff it has one; false: all unlabeled "
             "(answers kept as simulation.hidden_answer) (default: true)",
    )
    group.add_argument("--unlabeled", action="store_const", dest="labeled", const="false",
                       help="same as --labeled false")
    parser.add_argument("--no-hidden-answers", action="store_true",
                        help="with unlabeled rows, drop answers instead of keeping them as simulation truth")
    parser.add_argument("--system-prompt", help="system message put before each question")
    parser.add_argument("--prompt-template", help="user message template with a {question} placeholder")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    return parser


def run_import(args: argparse.Namespace) -> int:
    """Run the import for parsed ``args``; prints a summary; returns an exit code."""
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"error: {out} exists (use --force to replace it)", file=sys.stderr)
        return 1
    id_field = args.id_field
    if id_field is not None and id_field.lower() == "none":
        id_field = ""
    source = args.source or Path(args.input).stem
    try:
        rows, summary = import_raw_with_summary(
            args.input,
            source=source,
            data_source=args.data_source,
            split=args.split,
            labeled=_LABELED[args.labeled],
            question_field=args.question_field,
            answer_field=args.answer_field,
            id_field=id_field,
            ability=args.ability,
            system_prompt=args.system_prompt,
            prompt_template=args.prompt_template,
            hidden_answers=not args.no_hidden_answers,
        )
        write_records(rows, out)
    except (RecordError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(summary.describe())
    print(f"wrote {summary.rows} rows ({summary.labeled} labeled) to {out}")
    return 0


def main_import(argv: list[str] | None = None) -> int:
    """``devenus import INPUT --out OUT [...]``; returns the exit code."""
    parser = add_import_arguments(
        argparse.ArgumentParser(prog="devenus import", description="Import raw data as DE-Venus records.")
    )
    return run_import(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_import())
