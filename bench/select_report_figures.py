"""The pictures of docs/selection.md's "Report" section and the numbers they draw: ``devenus select``
generate, score, route and report on the first N testbed-pool questions x 8 samples (T = 1, seed 0), routed
as the selection experiment routes (ratio on consistency: the most uncertain 29.3% annotated, the least
uncertain 42.1% discarded; experiments/selection.py), every model signal scored.

    python bench/select_report_figures.py [--questions 512] [--out outputs/select_report] [--pictures docs/selection]

The run is the shipped config (src/devenus/configs/select/testbed.yaml) with ``limit``, ``out`` and
``score.signals`` set, so ``devenus select report`` on the same settings draws the same pictures. The report's
numbers (each signal's AUROC for a wrong majority and for a zero-variance group, intervals, class counts,
the routing summary) and the routed signal's calibration curve go to
``bench/results/select_report_testbed.json`` (commit, machine, date; ``--no-save``: not); the routed
signal's calibration picture, ``auroc.png`` and ``routing.png`` are copied to ``--pictures``.

    python bench/select_report_figures.py --redraw [--pictures docs/selection]

draws the three pictures again from the committed JSON alone (no generation, nothing saved).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "src" / "devenus" / "configs" / "select" / "testbed.yaml"
RESULTS = ROOT / "bench" / "results" / "select_report_testbed.json"


def publish(paths: list[Path], routed: str, pictures: str | None) -> list[Path]:
    """The published pictures among ``paths``, copied to ``pictures`` where given."""
    published = [p for p in paths if p.name in (f"calibration_{routed}.png", "auroc.png", "routing.png")]
    if pictures:
        for p in published:
            print(shutil.copyfile(p, Path(pictures) / p.name))
    return published


def redraw(out: Path, pictures: str | None) -> None:
    """The pictures from the committed report (it keeps the routed signal's curve only, the one published)."""
    import json

    from devenus.select.report import draw, summary_lines

    rep = json.loads(RESULTS.read_text())["result"]["report"]
    out.mkdir(parents=True, exist_ok=True)
    print("\n".join(summary_lines(rep)))
    publish(draw(rep, out), rep["routing"]["signal"], pictures)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=512)
    ap.add_argument("--out", default="outputs/select_report")
    ap.add_argument("--pictures", default=None, help="copy the three published pictures here (docs/selection)")
    ap.add_argument("--no-save", action="store_true", help="print the table only")
    ap.add_argument("--redraw", action="store_true", help=f"draw from {RESULTS.relative_to(ROOT)} only")
    a = ap.parse_args()
    if a.redraw:
        return redraw(Path(a.out), a.pictures)

    import torch

    from devenus.select.config import MODEL_SIGNALS, load_config
    from devenus.select.stages import run_generate, run_route, run_score
    from devenus.select.report import run_report, summary_lines

    torch.set_num_threads(1)
    sets = {"out": a.out, "limit": a.questions, "score.signals": ["consistency", *MODEL_SIGNALS]}
    cfg = load_config(CONFIG, sets)
    seconds = {}
    for name, run in (("generate", run_generate), ("score", run_score)):
        t = time.perf_counter()
        run(cfg, progress=False)
        seconds[f"{name}_s"] = round(time.perf_counter() - t, 1)
    run_route(cfg, force=True, progress=False)
    rep, paths = run_report(cfg)
    print(f"generate {seconds['generate_s']:.0f} s, score {seconds['score_s']:.0f} s (0 s = reused shards)")
    print("\n".join(summary_lines(rep)))
    routed = cfg.route.signal
    published = publish(paths, routed, a.pictures)
    if not a.no_save:
        from _results import write_result

        # every signal's numbers; the curve only for the routed signal (the one picture published)
        signals = {k: {kk: vv for kk, vv in s.items() if kk != "curve" or k == routed} for k, s in rep["signals"].items()}
        print(write_result("select_report_testbed", {
            "args": vars(a), "config": str(CONFIG.relative_to(CONFIG.parents[4])), "sets": sets,
            "generate": cfg.generate_identity()["generate"], **seconds, "pictures": [p.name for p in published],
            "report": {**rep, "signals": signals}}))


if __name__ == "__main__":
    main()
