"""Build the shipped mathematics_dataset records (``src/devenus/data/mathematics_dataset/``), reproducibly.

DeepMind's ``mathematics_dataset`` (PyPI) needs ``sympy==1.5.1``, so it runs in a virtual environment of
its own (``<cache>/mathds-venv``, made on first use with the pins in :data:`PINS`); its command line has no
train-easy split and fails on the ``_composed`` modules, so this script calls its Python API
(``modules.train(entropy_fn)``, ``.test()``, ``.test_extra()``) directly, seeded per (split, module).

    python scripts/mathematics_dataset.py build            # JSONL -> devenus import -> records + dataset.json
    python scripts/mathematics_dataset.py chat --out DIR   # the same rows with a worked turn (for SmolLM2)
    python scripts/mathematics_dataset.py screen --modules arithmetic__add_or_sub,numbers__place_value
        # SmolLM2's base pass rate per module (devenus' HF backend and grader, the worked-turn prompt)

``build`` writes ``train.parquet`` (train-easy: the first third of each module's training entropy range),
``test_id.parquet`` (``interpolate``) and ``test_ood.parquet`` (``extrapolate``: each module's
``test_extra`` counterpart), each through ``devenus import`` with its own import manifest, and
``dataset.json`` naming the generator, the versions, the modules, the entropy, the seed and each file's
split and SHA-256. The same command with the same pins gives the same files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "devenus" / "data" / "mathematics_dataset"
#: the generator's environment, every package pinned (sympy 1.5.1 is what mathematics_dataset 1.0.1 needs;
#: numpy's and Python's random streams decide the questions)
PINS = ("mathematics_dataset==1.0.1", "sympy==1.5.1", "mpmath==1.4.1", "numpy==2.4.6", "six==1.17.0", "absl-py==2.5.1")
SEED = 0
#: train module -> its extrapolate counterpart (None: the dataset has none); chosen by SmolLM2's base pass
#: rate and the verifier's grading of their answers (README.md beside the data)
MODULES = {
    "arithmetic__add_sub_multiple": "arithmetic__add_sub_multiple_longer",
    "comparison__kth_biggest": "comparison__kth_biggest_more",
    "comparison__pair": None,
    "numbers__is_factor": None,
}
#: questions per split, shared equally by the modules
SIZES = {"train": 1024, "test_id": 256, "test_ood": 256}
#: the dataset's regime of each split; train-easy = level 0 of 3 of the training entropy (its generate.py)
REGIMES = {"train": "train-easy", "test_id": "interpolate", "test_ood": "extrapolate"}
SOURCE = "mathematics_dataset"
#: the user turn of the shipped rows: the chat pool's request for a box (devenus.smollm2.CHAT_SUFFIX)
PROMPT_TEMPLATE = "{question} Put the final answer in \\boxed{}."


# ----------------------------------------------------------------------------------- inside the venv
def _generate(spec: dict) -> None:
    """Run inside the generator's venv: write one JSONL per split of ``spec`` (no devenus import here)."""
    import random

    import numpy as np
    from mathematics_dataset import generate_settings
    from mathematics_dataset.modules import modules

    def flat(tree, prefix=None, out=None):
        out = {} if out is None else out
        for k, v in tree.items():
            name = f"{prefix}__{k}" if prefix else k
            flat(v, name, out) if isinstance(v, dict) else out.__setitem__(name, v)
        return out

    def easy(r):  # generate.py's _make_entropy_fn(0, 3): the first third of the range
        return (r[0], r[0] + (r[1] - r[0]) / 3)

    regimes = {"train-easy": flat(modules.train(easy)), "interpolate": flat(modules.test()),
               "extrapolate": flat(modules.test_extra())}
    seen: set[str] = set()  # a question appears once across all splits
    for split, job in spec["splits"].items():
        rows = []
        for m_i, (module, n) in enumerate(job["modules"].items()):
            fn = regimes[job["regime"]][module]
            random.seed(spec["seed"] * 1000 + m_i)
            np.random.seed(spec["seed"] * 1000 + m_i)
            got, tries = 0, 0
            while got < n:
                tries += 1
                if tries > 50 * n:
                    raise SystemExit(f"{job['regime']}/{module}: only {got} distinct questions in {tries} tries")
                p = fn()
                q, a = str(p.question), str(p.answer)
                # the dataset's own length filter (generate.sample_from_module)
                if len(q) > generate_settings.MAX_QUESTION_LENGTH or len(a) > generate_settings.MAX_ANSWER_LENGTH:
                    continue
                if q in seen:
                    continue
                seen.add(q)
                rows.append({"id": f"{split}/{module}/{got:04d}", "question": q, "answer": a, "family": module})
                got += 1
        with open(job["out"], "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


# ----------------------------------------------------------------------------------- outside it
def cache_dir() -> Path:
    return Path(os.environ.get("DEVENUS_CACHE") or Path.home() / ".cache" / "devenus")


def venv_python() -> Path:
    """The generator's interpreter, its venv made (or remade, when the pins changed) on first use."""
    venv = cache_dir() / "mathds-venv"
    py = venv / "bin" / "python"
    stamp = venv / "devenus-pins.txt"
    want = "\n".join(PINS) + "\n"
    if not (py.is_file() and stamp.is_file() and stamp.read_text() == want):
        print(f"[mathds] creating {venv} with {' '.join(PINS)} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PINS], check=True)
        stamp.write_text(want)
    return py


def generate(splits: dict[str, dict], tmp: Path, seed: int) -> dict[str, Path]:
    """JSONL per split: ``splits[name] = {"regime": ..., "modules": {module: count}}``."""
    spec = {"seed": seed, "splits": {s: {**job, "out": str(tmp / f"{s}.jsonl")} for s, job in splits.items()}}
    # a fixed hash seed: sympy's set orders may reach the printed question
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("PYTHONPATH", None)
    # -P: this file's folder is not put on sys.path (its name would hide the package it imports)
    subprocess.run([str(venv_python()), "-P", __file__, "_generate", json.dumps(spec)], check=True, env=env)
    return {s: tmp / f"{s}.jsonl" for s in splits}


def devenus_import(jsonl: Path, out: Path, split: str) -> None:
    """The project's importer, as a user runs it."""
    subprocess.run([sys.executable, "-m", "devenus", "import", str(jsonl), "--out", str(out), "--force",
                    "--source", SOURCE, "--split", split, "--prompt-template", PROMPT_TEMPLATE, "--no-progress"],
                   check=True)


def versions() -> dict[str, str]:
    code = "import sys,sympy,mathematics_dataset.modules,importlib.metadata as m;" \
           "print(sys.version.split()[0],sympy.__version__,m.version('mathematics_dataset'))"
    py, sym, mds = subprocess.run([str(venv_python()), "-P", "-c", code], check=True, capture_output=True,
                                  text=True).stdout.split()
    return {"python": py, "sympy": sym, "mathematics_dataset": mds}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def split_jobs(modules: dict[str, str | None], sizes: dict[str, int]) -> dict[str, dict]:
    """Each split's modules and counts: train and test_id share their size among ``modules``, test_ood
    among the extrapolate counterparts (a module without one, e.g. the yes/no ones, has no OOD questions)."""
    jobs = {}
    for split, size in sizes.items():
        names = [m for m in (modules.values() if split == "test_ood" else modules) if m]
        if size % len(names):
            raise SystemExit(f"{split}: {size} questions do not divide among {len(names)} modules")
        jobs[split] = {"regime": REGIMES[split], "modules": {m: size // len(names) for m in names}}
    return jobs


def build(out: Path, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    jobs = split_jobs(MODULES, SIZES)
    with tempfile.TemporaryDirectory() as tmp:
        raw = generate(jobs, Path(tmp), seed)
        files = {}
        for split, jsonl in raw.items():
            devenus_import(jsonl, out / f"{split}.parquet", split)
            files[f"{split}.parquet"] = {"split": split, "regime": REGIMES[split], "modules": jobs[split]["modules"],
                                         "raw_sha256": sha256(jsonl), "sha256": sha256(out / f"{split}.parquet")}
    from devenus.atomic import write_text_atomic

    manifest = {
        "generator": "mathematics_dataset (DeepMind, PyPI), through its Python API: scripts/mathematics_dataset.py",
        "versions": versions(), "pins": list(PINS), "seed": seed,
        "seeding": "random.seed and numpy.random.seed to seed*1000 + the module's position in its split; "
                   "PYTHONHASHSEED=0; a question already drawn (in any split) is drawn again",
        "entropy": {"train-easy": "modules.train(entropy_fn), entropy_fn = the first third of each range "
                                  "(generate.py's _make_entropy_fn(0, 3))",
                    "interpolate": "modules.test()", "extrapolate": "modules.test_extra()"},
        "length_filter": "question <= 160 and answer <= 30 characters (generate_settings)",
        "modules": MODULES, "prompt_template": PROMPT_TEMPLATE,
        "import": "devenus import <split>.jsonl --source mathematics_dataset --split <split> --prompt-template ...",
        "files": files,
    }
    write_text_atomic(out / "dataset.json", json.dumps(manifest, indent=1) + "\n")
    print(f"[mathds] wrote {', '.join(files)} and dataset.json in {out}")


def worked_turn(rows: list[dict], examples: dict[str, tuple[str, str]]) -> list[dict]:
    """:func:`devenus.data.worked_turn` with the shipped prompt template."""
    from devenus.data import worked_turn as phrase

    return phrase(rows, examples, PROMPT_TEMPLATE)


def chat(out: Path) -> None:
    """The shipped files phrased by :func:`devenus.data.mathematics_dataset_worked`, each a dataset version
    whose parent is the shipped file."""
    from devenus.data import SPLITS, mathematics_dataset, mathematics_dataset_worked
    from devenus.records.versions import write_version

    out.mkdir(parents=True, exist_ok=True)
    for s in SPLITS:
        rows = mathematics_dataset_worked(s)
        write_version(rows, out / f"{s}.parquet", rule="mathematics-dataset-worked-turn", force=True,
                      config={"worked_turn": "devenus.data.mathematics_dataset_worked"}, parent=mathematics_dataset(s))
    print(f"[mathds] wrote {', '.join(f'{s}.parquet' for s in SPLITS)} (worked turn) in {out}")


def screen(modules: list[str], splits: list[str], n: int, k: int, temperature: float, max_new_tokens: int,
           seed: int, out: Path | None) -> None:
    """SmolLM2's pass rate per module: avg@k on ``n`` questions of each split, phrased by
    :func:`worked_turn` (the example: one more train-easy question of the module, not scored), with
    devenus' HF backend and grader (``devenus eval``'s path)."""
    import time

    import torch

    from devenus.generate import Sampling
    from devenus.generate.hf import HFBackend
    from devenus.records import read_records
    from devenus.smollm2 import model_dir
    from devenus.verify import grade

    torch.set_num_threads(1)
    backend = HFBackend(str(model_dir()), batch_size=32)
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = {s: {"regime": REGIMES[s], "modules": {m: n + (s == "train") for m in modules}}
                for s in dict.fromkeys(["train", *splits])}
        raw = generate(jobs, Path(tmp), seed)
        data = {}
        for split, jsonl in raw.items():
            devenus_import(jsonl, Path(tmp) / f"{split}.parquet", split)
            data[split] = read_records(Path(tmp) / f"{split}.parquet")
        examples = {}
        for r in list(data["train"]):  # the first train question of each module is its worked turn
            m = r["extra_info"]["family"]
            if m not in examples:
                examples[m] = (r["extra_info"]["question"], r["reward_model"]["ground_truth"])
                data["train"].remove(r)
        for split in splits:
            rows = worked_turn(data[split], examples)
            for module in modules:
                mine = [r for r in rows if r["extra_info"]["family"] == module]
                t0 = time.perf_counter()
                comps = backend.generate([r["prompt"] for r in mine], [r["extra_info"]["index"] for r in mine], k,
                                         Sampling(temperature, 1.0, max_new_tokens, seed))
                scores, cut, none = [], 0, 0
                for r, cs in zip(mine, comps):
                    for c in cs:
                        g = grade(c.text, r["reward_model"]["ground_truth"], truncated=c.truncated)
                        scores.append(g.score)
                        cut += c.truncated
                        none += g.pred is None
                total = len(scores)
                row = {"split": split, "module": module, "questions": len(mine), "k": k,
                       "pass_rate": round(sum(scores) / total, 3), "no_answer": round(none / total, 3),
                       "cut": round(cut / total, 3), "seconds": round(time.perf_counter() - t0, 1),
                       "examples": [{"q": r["extra_info"]["question"], "gold": r["reward_model"]["ground_truth"],
                                     "out": cs[0].text} for r, cs in list(zip(mine, comps))[:4]]}
                table.append(row)
                print(json.dumps({k_: v for k_, v in row.items() if k_ != "examples"}), flush=True)
    if out:
        out.write_text(json.dumps({"temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed,
                                   "examples": examples, "rows": table}, indent=1) + "\n")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_generate"]:
        return _generate(json.loads(argv[1]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="generate, import and write the shipped files and dataset.json")
    b.add_argument("--out", type=Path, default=OUT)
    b.add_argument("--seed", type=int, default=SEED)
    c = sub.add_parser("chat", help="the shipped files with the worked turn before each question (for SmolLM2)")
    c.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("screen", help="SmolLM2's base pass rate per candidate module")
    s.add_argument("--modules", required=True, help="comma-separated train module names")
    s.add_argument("--splits", default="train", help="comma-separated: train (train-easy), test_id (interpolate)")
    s.add_argument("--n", type=int, default=32, help="questions per module")
    s.add_argument("--k", type=int, default=2, help="samples per question")
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--max-new-tokens", type=int, default=64)
    s.add_argument("--seed", type=int, default=1, help="a seed other than build's: questions not shipped")
    s.add_argument("--out", type=Path, default=None, help="write the table (with example answers) as JSON")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        build(a.out, a.seed)
    elif a.cmd == "chat":
        chat(a.out)
    else:
        screen(a.modules.split(","), a.splits.split(","), a.n, a.k, a.temperature, a.max_new_tokens, a.seed, a.out)


if __name__ == "__main__":
    main()
