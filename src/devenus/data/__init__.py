"""Datasets shipped with the package.

``mathematics_dataset/``: 1,536 questions from DeepMind's ``mathematics_dataset`` as records Parquet
(``train``, ``test_id``, ``test_ood``), built by ``scripts/mathematics_dataset.py build``; its
``dataset.json`` names the generator, versions, modules, entropy, seed and each file's SHA-256
(docs/own_data.md, "The shipped dataset").
"""

from __future__ import annotations

from pathlib import Path

MATHEMATICS_DATASET = Path(__file__).resolve().parent / "mathematics_dataset"
SPLITS = ("train", "test_id", "test_ood")


def worked_turn(rows: list[dict], examples: dict[str, tuple[str, str]], template: str) -> list[dict]:
    """Rows phrased for a small chat model, in place: before the question, one solved question of the same
    module (``examples[module] = (question, answer)``, the question phrased by ``template``) answered
    ``The final answer is \\boxed{answer}.`` (SmolLM2-135M rarely boxes an answer to these questions after
    a generic worked turn: mathematics_dataset/README.md)."""
    for r in rows:
        q, a = examples[r["extra_info"]["family"]]
        r["prompt"] = [{"role": "user", "content": template.replace("{question}", q)},
                       {"role": "assistant", "content": f"The final answer is \\boxed{{{a}}}."}, r["prompt"][-1]]
    return rows


def mathematics_dataset_worked(split: str) -> list[dict]:
    """The rows of one shipped split with the worked turn before each question: a module's example is its
    first ``train`` row, and an extrapolate module uses its train module's (``dataset.json``'s ``modules``)."""
    import json

    from devenus.records import read_records

    manifest = json.loads((MATHEMATICS_DATASET / "dataset.json").read_text())
    examples: dict[str, tuple[str, str]] = {}
    for r in read_records(mathematics_dataset("train")):
        examples.setdefault(r["extra_info"]["family"], (r["extra_info"]["question"], r["reward_model"]["ground_truth"]))
    examples.update({ood: examples[m] for m, ood in manifest["modules"].items() if ood})
    return worked_turn(read_records(mathematics_dataset(split)), examples, manifest["prompt_template"])


def mathematics_dataset(split: str) -> Path:
    """The records file of one split of the shipped mathematics_dataset set."""
    if split not in SPLITS:
        raise ValueError(f"mathematics_dataset has splits {', '.join(SPLITS)}, not {split!r}")
    return MATHEMATICS_DATASET / f"{split}.parquet"
