"""``devenus transition D(k) --evidence DIR --rule {promote,correct} --out D(k+1)``."""

from __future__ import annotations

import argparse


def _threshold(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, found {text!r}")
    k, v = text.split("=", 1)
    return k.strip(), v.strip()


def add_parser(subparsers) -> None:
    from devenus.transitions.build import CONFIGS, RULE_METHODS

    helps = "; ".join(f"{r}: {', '.join(f'{k}={v}' for k, v in vars(c()).items())}" for r, c in CONFIGS.items())
    t = subparsers.add_parser(
        "transition", help="derive D(k+1) from D(k) and the evidence of a training round",
        description="Apply one rule's proposals from an evidence table to D(k); write D(k+1) and its manifest "
                    "(every accepted change with its evidence, every rejected proposal with the reason).")
    t.add_argument("data", help="D(k): the records Parquet the evidence was collected on")
    t.add_argument("--evidence", required=True, help="the evidence directory of the round (devenus.evidence_dir)")
    t.add_argument("--rule", required=True, choices=sorted(RULE_METHODS),
                   help=", ".join(f"{r} applies {m}'s proposals" for r, m in sorted(RULE_METHODS.items())))
    t.add_argument("--round", type=int, default=0, help="k, the round of the evidence to read (default: 0)")
    t.add_argument("--set", dest="thresholds", action="append", type=_threshold, default=[], metavar="NAME=VALUE",
                   help=f"a threshold (repeatable); defaults: {helps}")
    t.add_argument("--out", required=True, help="D(k+1): records Parquet to write (a manifest is written beside it)")
    t.add_argument("--force", action="store_true", help="replace --out if it exists (never the input)")
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
