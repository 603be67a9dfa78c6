"""``devenus select generate|score|route|materialize|run|report CONFIG``: active data selection.

CONFIG is a YAML (or JSON) file of :class:`devenus.select.config.SelectConfig` keys; ``--set KEY=VALUE``
overrides one (dotted keys, YAML values: ``--set generate.samples=4``). Each stage resumes from its
last complete shard; ``--force`` redoes it (and, for materialize, replaces the output).
"""

from __future__ import annotations

import argparse

STAGES = ("generate", "score", "route", "materialize", "run", "report")


def _override(text: str) -> tuple[str, object]:
    from devenus.config import ConfigError, parse_override

    try:
        return parse_override(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_select(args) -> int:
    from devenus.select.config import load_config
    from devenus.select.route.router import get_router

    overrides = dict(args.set or [])
    if args.out:
        overrides["out"] = args.out
    cfg = load_config(args.config, overrides)
    stage = args.select_cmd
    if stage in ("run", "materialize") or (stage == "route" and get_router(cfg.route.selector).annotates_while_routing):
        cfg.check_sources()  # the answers are needed: a missing file fails now, not after the model ran
    import torch  # after the config: a bad value fails in a second, before torch loads

    from devenus.select import stages

    torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", "1") or 1))
    progress = False if args.no_progress else None
    run = stages.SelectionRun(cfg)
    if stage in ("generate", "score"):
        run_stage = stages.run_generate if stage == "generate" else stages.run_score
        st = run_stage(run, force=args.force, progress=progress, actors=args.actors)
        print(f"{stage}: {st.summary()} in {st.folder}")
    elif stage == "route":
        st = stages.run_route(run, force=args.force, progress=progress)
        s = st.summary()
        print(f"route ({s['selector']} on {s['signal']}): {s['counts']} in {st.folder}")
        _routing_warnings(s)
    elif stage == "report":
        from devenus.select.report import run_report, summary_lines

        rep, paths = run_report(cfg, args.report_dir, pictures=not args.no_pictures)
        print("\n".join(summary_lines(rep)))
        for p in paths:
            print(f"wrote {p}")
    else:
        if stage == "materialize":
            m = stages.run_materialize(run, force=args.force, progress=progress)
        else:
            m = stages.run_all(run, force=args.force, progress=progress, actors=args.actors)
        c = m.config["routing"]["counts"]
        print(f"wrote {m.output_path}: {m.output['rows']} rows ({m.output['labeled']} labeled); routing {c}; "
              f"manifest {m.path}")
        _routing_warnings(m.config["routing"])
    return 0


def _routing_warnings(summary: dict) -> None:
    """One line each: a routing signal routed on although constant (route.on_constant_signal=warn), labels demoted."""
    from devenus.select.stages.route import demoted_line

    if summary.get("signal_warning"):
        print(f"warning: {summary['signal_warning']}")
    line = demoted_line(summary)
    if line:
        print(line)


def add_parser(subparsers) -> None:
    from devenus.config import arg_type

    p = subparsers.add_parser("select", help="active data selection: generate -> score -> route -> materialize")
    sub = p.add_subparsers(dest="select_cmd", required=True, metavar="{" + ",".join(STAGES) + "}")
    helps = {
        "generate": "sample G responses per pool question (resumable shards)",
        "score": "per-sample and per-question uncertainty signals",
        "route": "one decision per question: annotate, weak, keep or discard",
        "materialize": "write the next dataset version (Parquet + manifest)",
        "run": "all four stages",
        "report": "per-signal calibration curves, AUROC for a wrong majority, routing summary (pictures)",
    }
    for name in STAGES:
        sp = sub.add_parser(name, help=helps[name])
        sp.add_argument("config", nargs="?", default=None, help="YAML/JSON config file (default: the built-in defaults)")
        sp.add_argument("--set", action="append", type=_override, metavar="KEY=VALUE",
                        help="override a config key (dotted, YAML value), e.g. generate.samples=4; repeatable")
        sp.add_argument("--out", default=None, help="run folder (overrides the config's out)")
        sp.add_argument("--force", action="store_true", help="redo the stage(s) from scratch; replace the output version")
        sp.add_argument("--no-progress", action="store_true", help="no progress bars")
        if name in ("generate", "score", "run"):
            sp.add_argument("--actors", type=arg_type(int, ge=0), default=0,
                            help="run generate/score shards on a local Ray Data pool of this many actors (default 0: in this process)")
        if name == "report":
            sp.add_argument("--report-dir", default=None, help="where to write report.json and the pictures (default: <run>/report)")
            sp.add_argument("--no-pictures", action="store_true", help="report.json and the table only")
        sp.set_defaults(fn=cmd_select)
