"""What a training run leaves on disk, read back: verl's ``file`` tracker and its validation dumps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable


def read_metrics(paths: Path | Iterable[Path]) -> list[dict]:
    """verl's ``file`` tracker writes one ``{"step": N, "data": {...}}`` per line; return ``{"step": N, **data}``
    per step, in step order. Several files (one per launch of a resumed run) merge by step: a later file's
    row of a step replaces an earlier one (a resumed run redoes the steps after its checkpoint). A line
    cut by a kill is skipped."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    by_step: dict[int, dict] = {}
    for path in paths:
        if not path.exists():
            continue
        seen: dict[int, dict] = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            # verl logs a step's validation and its training metrics in separate calls: merge within a file
            seen.setdefault(int(e["step"]), {}).update(e["data"])
        by_step.update(seen)
    return [{"step": s, **by_step[s]} for s in sorted(by_step)]


def validation_dumps(dump_dir: Path) -> dict[int, Path]:
    """Step -> ``<step>.jsonl`` of ``trainer.validation_data_dir`` (empty when there is none)."""
    if not dump_dir.is_dir():
        return {}
    return {int(p.stem): p for p in dump_dir.glob("*.jsonl") if p.stem.isdigit()}


def scores_per_question(dump: Path) -> dict[str, list[float]]:
    """Question text -> the scores verl's validation gave its samples, from one dump."""
    from devenus.evaluate.compare import question_of_dump

    out: dict[str, list[float]] = {}
    for line in dump.read_text(encoding="utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            out.setdefault(question_of_dump(e["input"]), []).append(float(e["score"]))
    return out
