"""What a person reads while a run trains and when it ends, made from verl's ``file`` tracker records.

verl's ``console`` logger prints each step's whole metrics dict (hundreds of keys) on one line; here a step is
one short line of the few numbers that tell whether a run is learning, and a run ends with a summary. The
full dict stays in ``<out>/metrics/<n>.jsonl`` (:mod:`devenus.runs.logs`). Both take the rows
:func:`devenus.runs.logs.read_metrics` returns (``{"step": N, **metrics}``), as
:func:`devenus.runs.launch.launch` hands them to its ``on_step`` callback.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Mapping, Sequence

from devenus.online.sampling.dynamic_sampling import ROLLOUTS_GENERATED as ROLLOUTS

#: verl's headline validation metric: ``val-core/<data_source>/<acc or reward>/mean@<samples>``
_VAL = re.compile(r"^val-core/(?P<source>.+)/(?:acc|reward)/mean@(?P<k>\d+)$")
REWARD = "critic/score/mean"
RESPONSE_LENGTH = "response_length/mean"
STEP_TIME = "timing_s/step"


def _number(m: Mapping, key: str) -> float | None:
    v = m.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def validation(m: Mapping) -> dict[str, tuple[float, int]]:
    """Data source -> (mean accuracy, samples per question) of the validation in one step's metrics (the
    most samples where several are logged); empty for a step without validation."""
    out: dict[str, tuple[float, int]] = {}
    for key, v in m.items():
        hit = _VAL.match(key)
        if hit is None or (value := _number(m, key)) is None:
            continue
        k = int(hit["k"])
        if hit["source"] not in out or k > out[hit["source"]][1]:
            out[hit["source"]] = (value, k)
    return dict(sorted(out.items()))


def step_line(m: Mapping, total_steps: int | None = None) -> str:
    """One readable line for one step: step, reward mean, response length, validation when present, step
    time and rollouts generated (each left out when the step did not log it)."""
    step = int(m["step"])
    parts = [f"step {step}/{total_steps}" if total_steps else f"step {step}"]
    if step == 0:
        parts[0] += " (before training)"
    for key, fmt in ((REWARD, "reward {:.3f}"), (RESPONSE_LENGTH, "response length {:.1f}")):
        if (v := _number(m, key)) is not None:
            parts.append(fmt.format(v))
    val = validation(m)
    if val:
        parts.append("val " + " ".join(f"{src} {acc:.3f}" for src, (acc, _) in val.items()))
    if (v := _number(m, STEP_TIME)) is not None:
        parts.append(f"{v:.1f} s")
    if (v := _number(m, ROLLOUTS)) is not None:
        parts.append(f"{v:.0f} rollouts")
    return " | ".join(parts)


def summary_lines(metrics: Sequence[Mapping], wall_s: float, checkpoint: Path | None) -> list[str]:
    """The end of a run: steps trained, wall time, the last validation per data source (beside the first,
    when the run validated more than once) and the checkpoint (or that none was saved)."""
    trained = [int(m["step"]) for m in metrics if int(m["step"]) > 0]
    lines = [f"steps: {max(trained, default=0)}", f"wall time: {wall_s:.0f} s"]
    validated = [m for m in metrics if validation(m)]
    if validated:
        first, last = validation(validated[0]), validation(validated[-1])
        lines.append(f"final validation (step {validated[-1]['step']}, mean accuracy over samples):")
        for src, (acc, k) in last.items():
            before = ""
            if len(validated) > 1 and src in first:
                before = f" (step {validated[0]['step']}: {first[src][0]:.3f})"
            lines.append(f"  {src}: {acc:.3f} avg@{k}{before}")
    else:
        lines.append("final validation: none logged")
    lines.append(f"checkpoint: {checkpoint}" if checkpoint else "checkpoint: none saved")
    return lines
