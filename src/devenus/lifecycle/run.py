"""``devenus lifecycle``: rounds of train on D(k) -> evidence -> ``devenus transition`` -> D(k+1), resumable.

Layout under ``out_dir``::

    data/d0.parquet (+ manifest)        D(0), derived from the testbed or copied from data.path
    data/d<k+1>.parquet (+ manifest)    written by round k's transition
    round-<k>/train/                    verl's checkpoints, validation dumps, train.log
    round-<k>/train/checkpoints/evidence  round k's evidence table (visits, probes, proposals)
    round-<k>/train.json                the finished training's summary (its presence = training done)
    round-<k>/report.json               the round's report (its presence = round done: a rerun skips it)
    report.md                           every finished round in one table

Each round trains from the base model on D(k): the rounds compare datasets, not a continued policy.
A killed round resumes: finished training is not rerun, an unfinished one is started again (verl's
``resume_mode=auto`` picks up its checkpoints), the transition is deterministic and idempotent (an
existing D(k+1) is kept when its manifest verifies).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from devenus.lifecycle.config import LifecycleConfig
from devenus.atomic import write_text_atomic

#: train(config, round, D(k), round folder) -> {"held_out": {split: accuracy}, "wall_s": ..., ...}
TrainFn = Callable[[LifecycleConfig, int, Path, Path], dict[str, Any]]


def data_path(cfg: LifecycleConfig, k: int) -> Path:
    return Path(cfg.out_dir) / "data" / f"d{k}.parquet"


def round_dir(cfg: LifecycleConfig, k: int) -> Path:
    return Path(cfg.out_dir) / f"round-{k}"


def evidence_dir(cfg: LifecycleConfig, k: int) -> Path:
    from devenus.runs.testbed import evidence_dir as run_evidence_dir

    return run_evidence_dir(round_dir(cfg, k) / "train")


def write_json(path: Path, doc: Any) -> None:
    """Atomically (temp file + rename): a kill never leaves a half report that a rerun would trust."""
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def label_counts(path: Path) -> dict[str, int]:
    """Rows of a dataset by label state (labeled / unlabeled) and by ``label_source``."""
    from devenus.records.io import read_records

    rows = read_records(path)
    labeled = sum(bool(r["extra_info"].get("labeled")) for r in rows)
    return {"rows": len(rows), "labeled": labeled, "unlabeled": len(rows) - labeled,
            **Counter(f"source/{r['extra_info'].get('label_source')}" for r in rows)}


def make_d0(cfg: LifecycleConfig) -> Path:
    """D(0): ``data.path`` as given, or the testbed's first ``data.rows`` training rows with labels hidden
    (semi) or inactive noise (noisy); written once through the dataset-version writer."""
    from devenus.records.io import read_records
    from devenus.records.versions import write_version

    out = data_path(cfg, 0)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    d = cfg.data
    if d.path is not None:
        rows = read_records(d.path)
        write_version(rows, out, rule="lifecycle-d0", config={"source": os.path.basename(d.path)}, inputs=[d.path])
        return out
    from devenus.testbed import build_testbed

    rows = read_records(build_testbed().split("train"))[:d.rows]
    if d.testbed == "semi":
        from devenus.records.labels import hide_labels

        rows = hide_labels(rows, d.fraction, d.seed)
    else:
        from devenus.testbed.noise import inject_noise

        rows = inject_noise(rows, d.fraction, "inactive", d.seed)
    write_version(rows, out, rule="lifecycle-d0", config={"testbed": d.testbed, "rows": d.rows,
                                                          "fraction": d.fraction, "seed": d.seed})
    return out


def transition_round(cfg: LifecycleConfig, k: int) -> dict[str, Any]:
    """D(k) + round k's evidence -> D(k+1). An existing D(k+1) (a rerun, or one left by a kill between the two
    renames) is built again: from the same D(k) and evidence the build is byte-identical."""
    from devenus.transitions.build import build_transition

    src, dst = data_path(cfg, k), data_path(cfg, k + 1)
    r = build_transition(src, evidence_dir(cfg, k), dst, cfg.rule, round=k,
                         thresholds=dict(cfg.transition.thresholds), force=dst.exists())
    return {"rule": cfg.rule, "proposals": r.proposals, "accepted": r.accepted, "rejected": r.rejected,
            "precision": r.precision, "recall": r.recall, "manifest": os.path.relpath(r.manifest.path, cfg.out_dir)}


def run_lifecycle(cfg: LifecycleConfig, train: TrainFn | None = None, log: Callable[[str], None] = print) -> list[dict]:
    """Run every round not finished yet; returns the reports of all rounds (finished earlier or now)."""
    train = train or train_round
    make_d0(cfg)
    reports = []
    for k in range(cfg.rounds):
        rd = round_dir(cfg, k)
        rep_path = rd / "report.json"
        if rep_path.exists():
            log(f"round {k}: complete, skipped ({rep_path})")
            reports.append(json.loads(rep_path.read_text()))
            continue
        t0 = time.perf_counter()
        done = rd / "train.json"
        reused = done.exists()
        if reused:
            trained = json.loads(done.read_text())
            log(f"round {k}: training complete, reused")
        else:
            log(f"round {k}: training {cfg.method} on {data_path(cfg, k).name} for {cfg.steps_per_round} steps")
            trained = train(cfg, k, data_path(cfg, k), rd)
            write_json(done, trained)
        change = transition_round(cfg, k)
        rep = {"round": k, "method": cfg.method, "data": data_path(cfg, k).name, "next": data_path(cfg, k + 1).name,
               "before": label_counts(data_path(cfg, k)), "after": label_counts(data_path(cfg, k + 1)),
               "transition": change, "held_out": trained.get("held_out", {}), "train_wall_s": trained.get("wall_s"),
               # a reused training's time counts once, as measured when it ran
               "round_wall_s": round(time.perf_counter() - t0 + (float(trained.get("wall_s") or 0.0) if reused else 0.0), 1)}
        write_json(rep_path, rep)
        reports.append(rep)
        log(f"round {k}: {change['accepted']} of {change['proposals']} proposed rows changed; "
            f"{rep['after']['labeled']}/{rep['after']['rows']} labeled in {rep['next']}")
        from devenus.lifecycle.markdown import write_markdown

        write_markdown(cfg, reports)
    return reports


def val_path(cfg: LifecycleConfig) -> Path:
    return Path(cfg.out_dir) / "data" / "val.parquet"


def round_run_config(cfg: LifecycleConfig, k: int, data: Path):
    """Round k's run on D(k) (a :class:`~devenus.runs.testbed.RunConfig`): what :func:`train_round` launches,
    and what a test checks with ``devenus.train``'s preflight without launching it."""
    from devenus.runs.testbed import RunConfig

    t = cfg.train
    extra = [f"+devenus.method_config.{k_}={v}" for k_, v in sorted(cfg.method_config.items())]
    if t.probe_every_k_steps:
        extra += [f"+devenus.probe.every_k_steps={t.probe_every_k_steps}",
                  f"+devenus.probe.sample_size={t.probe_sample_size}"]
    return RunConfig(method=cfg.method, steps=cfg.steps_per_round, prompts_per_step=t.prompts_per_step,
                     rollouts_per_prompt=t.rollouts_per_prompt, val_n=t.val_n, seed=cfg.seed,
                     train_file=str(data), val_before_train=False,
                     extra_overrides=(f"data.val_files={val_path(cfg)}", f"+devenus.round={k}", *extra, *t.overrides))


def train_round(cfg: LifecycleConfig, k: int, data: Path, rd: Path) -> dict[str, Any]:
    """Round k's training: ``python -m devenus.train`` (verl's trainer; the CPU backend on a CPU host) on D(k)
    from the testbed's base model, with probe passes, validation at the last step on a held-out sample."""
    from devenus.records.io import read_records
    from devenus.records.versions import write_version
    from devenus.runs.testbed import accuracy_by_split, run
    from devenus.testbed import build_testbed

    tb = build_testbed()
    t = cfg.train
    val = val_path(cfg)
    if not val.exists():  # a small held-out set, the same every round: ID and OOD questions
        rows = [r for s in ("test_id", "test_ood") for r in read_records(tb.split(s))[:t.val_rows]]
        write_version(rows, val, rule="lifecycle-val", config={"rows_per_split": t.val_rows})
    run_cfg = round_run_config(cfg, k, data)
    for attempt in range(3):
        r = run(tb, rd / "train", run_cfg)
        # Ray's node start has a fixed 30 s deadline that a loaded host can miss before anything trained:
        # that one failure is retried (resume_mode=auto), any other is the round's error
        if r.ok or "timed out during startup" not in r.tail(200):
            break
        print(f"round {k}: Ray did not start in time (attempt {attempt + 1}); retrying", flush=True)
    r.check(f"round {k}: devenus.train")
    held = {}
    accuracy = accuracy_by_split(tb, r.validation)
    if accuracy:
        held = {name: v["sampled"]["mean"] for name, v in accuracy[max(accuracy)].items()}
    probe = [m for m in r.metrics if "probe/seconds" in m]
    return {"held_out": held, "wall_s": round(r.wall_s, 1), "steps": sum(m["step"] > 0 for m in r.metrics),
            "probe_seconds": [round(m["probe/seconds"], 3) for m in probe]}
