"""``devenus transition D(k) --evidence DIR --rule RULE --out D(k+1)``."""

from __future__ import annotations

import argparse

from devenus.config import arg_type


def _threshold(text: str) -> tuple[str, object]:
    from devenus.config import ConfigError, parse_override

    try:
        return parse_override(text)  # the value as a YAML scalar: 0.5 a number, true a bool
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(subparsers) -> None:
    # the registry's names only: building the parser imports no rule module (those import torch)
    from devenus.transitions.rules import names

    t = subparsers.add_parser(
        "transition", help="derive D(k+1) from D(k) and the evidence of a training round",
        description="Apply one rule's proposals from an evidence table to D(k); write D(k+1) and its manifest "
                    "(every accepted change with its evidence, every rejected proposal with the reason).")
    t.add_argument("data", help="D(k): the records Parquet the evidence was collected on")
    t.add_argument("--evidence", required=True, help="the evidence directory of the round (devenus.evidence_dir)")
    t.add_argument("--rule", required=True, help=f"the rule to apply, one of: {', '.join(names())} "
                   "(promote: TraPO v2's proposals, correct: NL-OLR v2's; docs/lifecycle.md)")
    t.add_argument("--round", type=arg_type(int, ge=0), default=0, help="k, the round of the evidence to read (default: 0)")
    t.add_argument("--set", dest="thresholds", action="append", type=_threshold, default=[], metavar="NAME=VALUE",
                   help="a threshold of the rule (repeatable; defaults: its method's, listed by "
                        "`devenus methods <method>`); an unknown name is an error that lists them")
    t.add_argument("--out", required=True, help="D(k+1): records Parquet to write (a manifest is written beside it)")
    t.add_argument("--force", action="store_true", help="replace --out if it exists (never an input)")
    t.set_defaults(fn=cmd_transition)


def cmd_transition(args: argparse.Namespace) -> int:
    from devenus.transitions.build import build_transition

    r = build_transition(args.data, args.evidence, args.out, args.rule, round=args.round,
                         thresholds=dict(args.thresholds), force=args.force)
    m = r.manifest
    print(f"wrote {args.out}: {m.output['labeled']}/{m.output['rows']} rows labeled; {r.accepted} of {r.proposals} "
          f"proposed rows changed ({m.counts['changes']} field changes), {r.rejected} proposals rejected; manifest {m.path}")
    if r.precision is not None or r.recall is not None:
        fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
        print(f"against simulation truth: precision {fmt(r.precision)}, recall {fmt(r.recall)}")
    return 0
