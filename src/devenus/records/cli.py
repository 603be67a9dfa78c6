"""``devenus import`` and ``devenus data ...``: raw data in, label-state transforms and subsets, as dataset versions.

:func:`add_parser` mounts the commands on the main CLI (``devenus.cli``); :func:`main_import` is the
standalone import (``python -m devenus.records.cli``). Every command that writes a file writes it
through :mod:`devenus.records.versions` (Parquet + manifest) and follows its output rule: an existing
output is refused unless ``--force``, an output that is an input always (``data head`` without
``--out`` only prints).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from devenus.commands import fraction, run_command
from devenus.config import arg_type
from devenus.records.prompts import FORMATS

_LABELED = {"true": True, "false": False, "auto": "auto"}


def add_import_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the import command's arguments to ``parser``."""
    parser.add_argument("input", help="raw data: .jsonl/.ndjson, .json, .csv/.tsv or .parquet")
    parser.add_argument("--out", "-o", required=True, help="records Parquet file to write (a manifest is written beside it)")
    parser.add_argument("--source", help="provenance name, prefixes every key (default: input file stem)")
    parser.add_argument("--data-source", help="data_source column, picks the scorer (default: --source; "
                                              "with --from-verl: the file's own)")
    parser.add_argument("--split", default="train", help="split name (default: train)")
    parser.add_argument("--ability", default=None, help="ability column (default: math; with --from-verl: the file's own)")
    parser.add_argument("--question-field", help="question column (default: auto-detect)")
    parser.add_argument("--answer-field", help="answer column (default: auto-detect)")
    parser.add_argument(
        "--id-field",
        help="id column for keys (default: auto-detect; 'none' = always use question hashes)",
    )
    parser.add_argument("--from-verl", action="store_true",
                        help="the input is verl's own layout (prompt messages, reward_model.ground_truth, "
                             "extra_info.index): keep its prompt, import its targets and keys")
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
    parser.add_argument("--prompt-format", metavar="NAME|FILE.yaml",
                        help=f"how a question becomes the prompt's chat messages: a registered format ({', '.join(FORMATS)}) "
                             "or a YAML file with the keys system, examples [{user, assistant}], instruction "
                             "(default: plain; docs/records.md)")
    parser.add_argument("--system-prompt", help="system message put before each question (replaces the format's)")
    parser.add_argument("--prompt-template",
                        help="user message template with a {question} placeholder, replacing the format's instruction "
                             "(default: the question, then a request to put the final answer in \\boxed{}; "
                             "'{question}' = the bare question)")
    parser.add_argument("--dedupe", choices=["exact"], default=None,
                        help="exact: a record whose prompt and target repeat an earlier one's is left out (the "
                             "first is kept, with its key); the same prompt with another target is kept and "
                             "reported (default: every record is a row)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists (never the input)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def run_import(args: argparse.Namespace) -> int:
    """Run the import for parsed ``args``; prints a summary; returns 0 (errors raise)."""
    from .importer import import_file

    id_field = args.id_field
    if id_field is not None and id_field.lower() == "none":
        id_field = ""
    summary, manifest = import_file(
        args.input, args.out, force=args.force, progress=False if args.no_progress else None,
        source=args.source or Path(args.input).stem,
        data_source=args.data_source,
        split=args.split,
        labeled=_LABELED[args.labeled],
        question_field=args.question_field,
        answer_field=args.answer_field,
        id_field=id_field,
        ability=args.ability,
        system_prompt=args.system_prompt,
        prompt_template=args.prompt_template,
        prompt_format=args.prompt_format,
        hidden_answers=not args.no_hidden_answers,
        from_verl=args.from_verl,
        dedupe=args.dedupe,
    )
    print(summary.describe())
    print(f"wrote {summary.rows} rows ({summary.labeled} labeled) to {args.out}; manifest {manifest.path}")
    return 0


def cmd_hide_labels(args: argparse.Namespace) -> int:
    from .labels import hide_labels_file

    m = hide_labels_file(args.input, args.out, args.labeled_fraction, args.seed, force=args.force,
                         progress=False if args.no_progress else None)
    print(f"wrote {args.out}: {m.output['labeled']}/{m.output['rows']} rows labeled "
          f"({m.counts['changed_rows']} hidden); manifest {m.path}")
    return 0


def cmd_pair_views(args: argparse.Namespace) -> int:
    from .pairs import pair_view_files

    rows = pair_view_files(args.original, args.paraphrase, args.out, force=args.force)
    print(f"wrote {args.out}: {len(rows) // 2} pairs ({len(rows)} rows), each original followed by its rewrite")
    return 0


def cmd_head(args: argparse.Namespace) -> int:
    from .subsets import describe_rows, head_file, head_rows

    if args.out:
        m = head_file(args.input, args.out, args.n, force=args.force)
        print(f"wrote {args.out}: the first {m.output['rows']} of {m.counts['rows_in']} rows; manifest {m.path}")
        return 0
    rows = head_rows(args.input, args.n)
    if args.json:
        import json

        for r in rows:
            print(json.dumps(r, ensure_ascii=False, default=str))
    else:
        print("key\tsplit\tlabel\ttarget\tlast user message")
        print("\n".join(describe_rows(rows)))
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    from .subsets import Where, filter_file, read_ids

    where = Where(tuple(args.source or ()), tuple(args.split or ()), args.label_state,
                  read_ids(args.ids_file) if args.ids_file else None)
    m = filter_file(args.input, args.out, where, force=args.force)
    print(f"wrote {args.out}: {m.output['rows']} of {m.counts['rows_in']} rows ({where.describe()}); manifest {m.path}")
    return 0


def cmd_split(args: argparse.Namespace) -> int:
    from .subsets import parse_fractions, split_file

    fractions = parse_fractions(args.fractions)
    names = args.names.split(",") if args.names else _SPLIT_NAMES.get(len(fractions))
    if names is None:
        raise ValueError(f"--names: give {len(fractions)} names for {len(fractions)} fractions")
    for m in split_file(args.input, args.out_dir, fractions, names, args.seed, force=args.force):
        print(f"wrote {m.output_path}: {m.output['rows']} of {m.counts['rows_in']} rows; manifest {m.path}")
    return 0


#: --names when not given, by the number of fractions
_SPLIT_NAMES = {2: ["train", "val"], 3: ["train", "val", "test"]}


def add_parser(subparsers) -> None:
    """Mount ``import`` and ``data {hide-labels,pair-views,head,filter,split}`` on the main CLI's sub-parsers."""
    i = subparsers.add_parser("import", help="convert raw JSONL/CSV/Parquet (or verl Parquet) into the record contract",
                              description="Convert raw question/answer data into a records Parquet file plus its manifest.")
    add_import_arguments(i)
    i.set_defaults(fn=run_import)

    data = subparsers.add_parser("data", help="label-state transforms and subsets of record files").add_subparsers(
        dest="data_cmd", required=True, metavar="{hide-labels,pair-views,head,filter,split}")
    h = data.add_parser("hide-labels", help="keep a fraction of labels; move the rest to simulation truth")
    h.add_argument("input", help="records Parquet file to read")
    h.add_argument("--labeled-fraction", type=fraction, required=True,
                   help="share of the labeled rows that keep their label, in [0, 1]")
    h.add_argument("--seed", type=arg_type(int, ge=0), default=0, help="which rows keep their label (default: 0)")
    h.add_argument("--out", required=True, help="records Parquet file to write (a manifest is written beside it)")
    h.add_argument("--force", action="store_true", help="replace --out if it exists (never the input)")
    h.add_argument("--no-progress", action="store_true", help="no progress bar")
    h.set_defaults(fn=cmd_hide_labels)
    pv = data.add_parser("pair-views", help="merge originals and their rewrites (joined by extra_info.pair_key)")
    pv.add_argument("original", help="records file of the original questions")
    pv.add_argument("paraphrase", help="records file of their rewrites (same pair_key, other index)")
    pv.add_argument("--out", required=True, help="records Parquet file to write (a manifest is written beside it)")
    pv.add_argument("--force", action="store_true", help="replace --out if it exists (never an input)")
    pv.set_defaults(fn=cmd_pair_views)
    hd = data.add_parser("head", help="show the first N rows, or write them as a new version (--out)")
    hd.add_argument("input", help="records Parquet file to read")
    hd.add_argument("-n", type=arg_type(int, ge=1), default=5, help="how many rows (default: 5)")
    hd.add_argument("--json", action="store_true", help="print whole rows as JSON lines (default: one short line a row)")
    hd.add_argument("--out", help="write the rows as a records Parquet file (a manifest beside it) instead of printing")
    hd.add_argument("--force", action="store_true", help="replace --out if it exists (never the input)")
    hd.set_defaults(fn=cmd_head)
    ft = data.add_parser("filter", help="keep the rows that match every condition given (extra_info fields)")
    ft.add_argument("input", help="records Parquet file to read")
    ft.add_argument("--source", action="append", metavar="NAME", help="extra_info.source is NAME (repeatable: any of them)")
    ft.add_argument("--split", action="append", metavar="NAME", help="extra_info.split is NAME (repeatable: any of them)")
    ft.add_argument("--label-state", choices=("labeled", "unlabeled"), help="only labeled or only unlabeled rows")
    ft.add_argument("--ids-file", metavar="FILE", help="keys (extra_info.index) to keep, one a line")
    ft.add_argument("--out", required=True, help="records Parquet file to write (a manifest is written beside it)")
    ft.add_argument("--force", action="store_true", help="replace --out if it exists (never the input)")
    ft.set_defaults(fn=cmd_filter)
    sp = data.add_parser("split", help="split into parts by fractions, deterministically (by key hash and seed)")
    sp.add_argument("input", help="records Parquet file to read")
    sp.add_argument("--fractions", required=True, help="comma-separated shares summing to 1, e.g. 0.8,0.1,0.1")
    sp.add_argument("--names", help="comma-separated part names, one per fraction (default: train,val[,test])")
    sp.add_argument("--seed", type=arg_type(int, ge=0), default=0, help="which rows go where (default: 0)")
    sp.add_argument("--out-dir", required=True, help="folder for <name>.parquet and its manifest, one per part")
    sp.add_argument("--force", action="store_true", help="replace existing parts (never the input)")
    sp.set_defaults(fn=cmd_split)


def main_import(argv: list[str] | None = None) -> int:
    """``devenus import INPUT --out OUT [...]``; returns the exit code (1 with ``error: ...`` on stderr)."""
    parser = add_import_arguments(
        argparse.ArgumentParser(prog="devenus import", description="Import raw data as DE-Venus records.")
    )
    return run_command(run_import, parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_import())
