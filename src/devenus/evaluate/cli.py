"""devenus eval: evaluate a checkpoint on your own record files, the field's protocol or the testbed's.

    devenus eval smollm2 --records id.parquet ood.parquet:OOD/ood   # your files, each under its own name
    devenus eval testbed                                   # the testbed base model, testbed protocol
    devenus eval outputs/run/checkpoints --protocol testbed   # a verl checkpoint (merged by verl's merger)
    devenus eval Qwen3-4B-run/ --data-dir benchmarks/ --max-new-tokens 3072 --backend vllm

Prints a table, writes results.json, samples.jsonl and accuracy.png to --out.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from devenus.config import arg_type
from devenus.generate import BACKENDS

if TYPE_CHECKING:
    from devenus.evaluate.benchmarks import Item, Protocol

#: the --protocol choices (devenus.evaluate.benchmarks.PROTOCOLS, named here so the parser imports nothing heavy)
PROTOCOL_NAMES = ("records", "paper", "testbed")

__all__ = ["add_parser", "run_eval"]


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"{what}: expected NAME=VALUE, got {v!r}")
        out[name.strip()] = rest.strip()
    return out


#: samples per question of ``--k NAME=K``
_SAMPLES = arg_type(int, ge=1)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_LABEL = re.compile(r"(?:[A-Za-z]+/)?" + _NAME.pattern)


def record_spec(spec: str) -> tuple[str, str, str]:
    """``--records`` value -> (group, name, path). ``FILE``, ``FILE:NAME``, ``FILE:GROUP/NAME`` or
    ``GROUP/NAME=FILE``; the name defaults to the file's stem, the group to ID. A value that is an
    existing file is a file, whatever characters it holds."""
    left, colon, right = spec.rpartition(":")
    if Path(spec).is_file():
        path, label = spec, ""
    elif colon and Path(left).is_file():
        path, label = left, right
    elif _LABEL.fullmatch(spec.partition("=")[0]) and "=" in spec:
        label, _, path = spec.partition("=")
    elif colon:
        path, label = left, right
    else:
        path, label = spec, ""
    group, sep, name = label.rpartition("/")
    group = group.upper() if sep else "ID"
    name = name or Path(path).stem
    if not path:
        raise ValueError(f"--records {spec!r}: no file (expected FILE, FILE:NAME or FILE:OOD/NAME)")
    if group not in ("ID", "OOD"):
        raise ValueError(f"--records {spec!r}: group must be ID or OOD, got {group!r}")
    if not _NAME.fullmatch(name):
        raise ValueError(f"--records {spec!r}: the benchmark name {name!r} must be letters, digits, _ . + - "
                         "(give one with FILE:NAME)")
    return group, name, path


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval", help="evaluate a checkpoint: avg@k, pass@k, maj@k per benchmark, ID/OOD averages, 95%% CIs",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="an HF model folder, a verl checkpoint (run root, global_step_N or its actor/), "
                                 "or an embedded model's name: testbed, smollm2 (devenus model list)")
    p.add_argument("--protocol", choices=tuple(PROTOCOL_NAMES), default=None,
                   help="benchmarks, samples and decoding (default: records when only --records files are given, "
                        "testbed for the 'testbed' model, else paper)")
    p.add_argument("--benchmarks", default=None, help="comma-separated subset of the protocol's benchmarks "
                                                      "(--records names are accepted too; those files always run)")
    p.add_argument("--data-dir", default=None, help="folder holding the benchmark files (see docs/evaluate.md)")
    p.add_argument("--file", action="append", metavar="NAME=PATH", help="one benchmark's file (repeatable)")
    p.add_argument("--records", action="extend", nargs="+", metavar="FILE[:[GROUP/]NAME]",
                   help="evaluate record-contract Parquet files, each reported under its own name (the file's "
                        "stem, or NAME) in group ID (or GROUP: ID, OOD), e.g. --records mine.parquet far.parquet:OOD/far")
    p.add_argument("--k", action="append", metavar="NAME=K", help="samples per question for one benchmark "
                   "(off-protocol; e.g. a CPU smoke run)")
    p.add_argument("--limit", type=arg_type(int, ge=1), default=None, help="the first N questions of each benchmark only")
    p.add_argument("--max-new-tokens", type=arg_type(int, ge=1), default=None,
                   help="the training run's max response length (required by the paper protocol)")
    p.add_argument("--temperature", type=arg_type(float, ge=0.0), default=None,
                   help="override the protocol's (off-protocol; 0: greedy)")
    p.add_argument("--top-p", type=arg_type(float, gt=0.0, le=1.0), default=None, help="override the protocol's (off-protocol)")
    p.add_argument("--backend", choices=("auto", *BACKENDS.names()), default="auto",
                   help="a generation backend (docs/generate.md); auto: vllm where importable with a GPU, else hf")
    p.add_argument("--batch-size", type=arg_type(int, ge=1), default=256, help="hf: sequences per generate call")
    p.add_argument("--device", default="cpu", help="hf: torch device")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"), help="hf: compute dtype")
    p.add_argument("--tensor-parallel-size", type=arg_type(int, ge=1), default=1, help="vllm")
    p.add_argument("--seed", type=arg_type(int, ge=0), default=0, help="sampling and bootstrap seed")
    p.add_argument("--bootstrap", type=arg_type(int, ge=1), default=2000, help="bootstrap resamples for the intervals")
    p.add_argument("--out", default=None, help="output folder (default outputs/eval/<model name>)")
    p.add_argument("--no-plot", action="store_true", help="do not draw accuracy.png")
    p.add_argument("--testbed-seed", type=arg_type(int, ge=0), default=0, help="which testbed ('testbed' model and testbed splits)")
    p.add_argument("--cache-dir", default=None, help="testbed cache (default $DEVENUS_CACHE or ~/.cache/devenus)")
    p.set_defaults(fn=run_eval)
    return p


def _testbed(args):
    from devenus.testbed import TestbedConfig, build_testbed

    return build_testbed(TestbedConfig(seed=args.testbed_seed), cache_dir=args.cache_dir)


def resolve_model(model: str, args) -> tuple[str, str]:
    """(HF folder, how it was found)."""
    if model == "testbed":
        return str(_testbed(args).model_dir), "testbed base model"
    from devenus.sources import model_names, resolve_model as resolve_named

    if model in model_names():  # another embedded model (smollm2): its folder, converted on first use
        return resolve_named(model), f"embedded model {model!r}"
    p = Path(model)
    if (p / "config.json").is_file():
        return str(p), "HF folder"
    if not p.exists():
        raise FileNotFoundError(f"model not found: {p}")
    from devenus.adapters.verl.checkpoint import merge_to_hf  # the only verl-importing step

    print(f"merging the verl checkpoint {p} with verl's model merger ...", file=sys.stderr)
    return str(merge_to_hf(p)), "verl checkpoint, merged"


def _default_name(model: str, model_dir: str) -> str:
    """A readable output name: 'testbed', the HF folder's name, or '<run>-global_step_N' for a verl checkpoint."""
    if model == "testbed":
        return "testbed"
    m = Path(model_dir).resolve()
    if m.parent.name == "actor" and m.parent.parent.name.startswith("global_step_"):
        step = m.parent.parent
        run = step.parent.parent.name if step.parent.name == "checkpoints" else step.parent.name
        return f"{run}-{step.name}"
    return m.name


def run_eval(args) -> int:
    try:
        return _run(args)
    except (ValueError, FileNotFoundError, KeyError) as e:  # BenchmarkError is a ValueError
        print(f"devenus eval: error: {e}", file=sys.stderr)
        return 2


def _protocol_name(args, records: list[tuple[str, str, str]], names: list[str] | None) -> str:
    """--protocol, else: records when only --records files are named, testbed for the testbed model, else paper."""
    if args.protocol:
        return args.protocol
    own = {n for _, n, _ in records}
    if records and not args.data_dir and not args.file and set(names or ()) <= own:
        return "records"
    return "testbed" if args.model == "testbed" else "paper"


def _run(args) -> int:
    from devenus.evaluate.outputs import format_table, write_outputs
    from devenus.generate import Sampling, make_backend
    from devenus.evaluate.run import evaluate
    from devenus.progress import progress_bar

    protocol, files, ks = _protocol_and_names(args)
    max_new = args.max_new_tokens or protocol.max_new_tokens
    if max_new is None:
        raise ValueError(f"protocol {protocol.name!r} samples up to the training run's max response length: "
                         f"pass --max-new-tokens (data.max_response_length of the run)")
    sampling = Sampling(protocol.temperature if args.temperature is None else args.temperature,
                        protocol.top_p if args.top_p is None else args.top_p, max_new, args.seed)

    # prepare every benchmark before loading the model: a bad file fails in seconds, not after an hour
    items = _prepare_items(args, protocol, files)
    model_dir, how = resolve_model(args.model, args)
    out = Path(args.out or Path("outputs") / "eval" / _default_name(args.model, model_dir))
    print(f"model: {model_dir} ({how})")
    print(_protocol_line(args, protocol, items, ks, max_new))

    backend = make_backend(args.backend, model_dir, batch_size=args.batch_size, device=args.device, dtype=args.dtype,
                           tensor_parallel_size=args.tensor_parallel_size, seed=args.seed,
                           max_model_len=None)
    bars = []

    def progress(name: str, total: int):
        # per question, and plain lines when stderr is a file (devenus.progress)
        bar = progress_bar(total, desc=name, unit="q", file=sys.stderr)
        bars.append(bar)
        return bar.update

    res = evaluate(backend, protocol, items, sampling, args.bootstrap, ks, progress, model=model_dir)
    for bar in bars:
        bar.close()
    print()
    print(format_table(res))
    paths = write_outputs(res, out, plot=not args.no_plot)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _protocol_and_names(args) -> tuple[Protocol, dict[str, str], dict[str, int]]:
    """The protocol this run evaluates (its benchmarks narrowed by --benchmarks, the --records files added),
    the file of each benchmark named on the command line, and the --k samples per question by name; every
    name checked against the run's benchmarks."""
    from dataclasses import replace

    from devenus.evaluate.benchmarks import PROTOCOLS, record_benchmark

    records = [record_spec(v) for v in args.records or []]
    names = [n.strip() for n in args.benchmarks.split(",") if n.strip()] if args.benchmarks else None
    protocol = PROTOCOLS[_protocol_name(args, records, names)]
    if protocol.name == "records" and not records:
        raise ValueError("protocol 'records' evaluates the files given with --records FILE[:NAME]: none given")
    own: dict[str, str] = {}
    for group, name, path in records:
        if name in own:
            raise ValueError(f"--records: two files named {name!r} ({own[name]}, {path}): name one with FILE:NAME")
        if name in {b.name for b in protocol.benchmarks}:
            raise ValueError(f"--records: {name!r} is already a benchmark of protocol {protocol.name!r}: "
                             f"name the file another way ({path}:NAME), or pass it with --file {name}={path}")
        own[name] = path
    if names is not None:
        unknown = [n for n in names if n not in own and n not in {b.name for b in protocol.benchmarks}]
        if unknown:
            raise ValueError(f"--benchmarks names {', '.join(unknown)}, not among this run's benchmarks: "
                             f"{', '.join([b.name for b in protocol.benchmarks] + list(own))}")
        protocol = replace(protocol, benchmarks=tuple(protocol.benchmark(n) for n in names if n not in own))
    protocol = replace(protocol, benchmarks=protocol.benchmarks + tuple(record_benchmark(name, group, 4)
                                                                        for group, name, _ in records))
    files = _pairs(args.file, "--file") | own
    ks = {}
    for n, v in _pairs(args.k, "--k").items():
        try:
            ks[n] = _SAMPLES(v)
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"--k {n}={v}: samples per question {e}") from None
    known = {b.name for b in protocol.benchmarks}
    for flag, names_given in (("--k", ks), ("--file", files)):
        unknown = sorted(set(names_given) - known)
        if unknown:
            raise ValueError(f"{flag} names {', '.join(unknown)}, not among this run's benchmarks: {', '.join(sorted(known))}")
    return protocol, files, ks


def _prepare_items(args, protocol: Protocol, files: dict[str, str]) -> dict[str, list[Item]]:
    """Each benchmark's prepared questions (the testbed's splits built on first use)."""
    from devenus.evaluate.benchmarks import find_file, prepare

    items = {}
    tb = None
    for b in protocol.benchmarks:
        if b.name in ("testbed_id", "testbed_ood") and b.name not in files:
            tb = tb or _testbed(args)
            path = tb.split("test_id" if b.name == "testbed_id" else "test_ood")
        else:
            path = find_file(b, args.data_dir, files)
        items[b.name] = prepare(b, path, args.limit)
    return items


def _protocol_line(args, protocol: Protocol, items: dict[str, list[Item]], ks: dict[str, int], max_new: int) -> str:
    """The run's benchmarks and sample counts, and what departs from the protocol."""
    off = [f"{n} k={k}" for n, k in ks.items()] + (["temperature"] if args.temperature is not None else []) + \
          (["top-p"] if args.top_p is not None else []) + ([f"--limit {args.limit}"] if args.limit else []) + \
          ([f"max {max_new} new tokens"] if protocol.max_new_tokens not in (None, max_new) else [])
    benches = ", ".join(f"{b.name} ({len(items[b.name])} x {ks.get(b.name, b.k)})" for b in protocol.benchmarks)
    return f"protocol {protocol.name}: {benches}" + (f"; off-protocol: {', '.join(off)}" if off else "")
