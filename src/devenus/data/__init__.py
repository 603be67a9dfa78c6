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


def mathematics_dataset(split: str) -> Path:
    """The records file of one split of the shipped mathematics_dataset set."""
    if split not in SPLITS:
        raise ValueError(f"mathematics_dataset has splits {', '.join(SPLITS)}, not {split!r}")
    return MATHEMATICS_DATASET / f"{split}.parquet"
