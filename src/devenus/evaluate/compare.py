"""Check an evaluation against verl's own validation of the same model on the same questions.

verl writes one JSON line per validation sample to ``trainer.validation_data_dir/<step>.jsonl``
(decoded prompt ``input``, ``score``, ...). :func:`verl_dump_scores` turns a dump into per-question
mean scores keyed like our items (``extra_info.index`` of the record files), and :func:`paired_difference`
compares two evaluations question by question: the same questions, so the difference of per-question
means has a far tighter interval than the two separate intervals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from devenus.evaluate.metrics import Interval, bootstrap_interval

__all__ = ["verl_dump_scores", "paired_difference", "per_question_means", "question_of_dump", "last_user_turn"]


def question_of_dump(text: str) -> str:
    """The question of one row of verl's validation dump: verl decodes the prompt without special tokens,
    "[system\n<text>\n]user\n<question>\nassistant\n" (the ChatML roles are left); with worked turns
    before it, the question is the last user turn."""
    text = text.strip()
    last = text.rfind("\nuser\n")
    if last >= 0:
        text = text[last + len("\nuser\n"):]
    elif text.startswith("user\n"):
        text = text[len("user\n"):]
    if text.endswith("assistant"):
        text = text[: -len("assistant")]
    return text.strip()


def last_user_turn(record: dict) -> str:
    """What :func:`question_of_dump` reads back for a record: its prompt's last user message."""
    return [m["content"] for m in record["prompt"] if m["role"] == "user"][-1].strip()


def verl_dump_scores(dump: str | Path, record_files: Sequence[str | Path]) -> dict[str, list[float]]:
    """Per question key, the scores verl's validation gave its samples (questions not in the files are skipped)."""
    from devenus.records import read_records

    key_of: dict[str, str] = {}
    for f in record_files:
        for r in read_records(f):
            key_of[last_user_turn(r)] = r["extra_info"]["index"]
    out: dict[str, list[float]] = {}
    for n, line in enumerate(Path(dump).read_text().splitlines()):
        if not line.strip():
            continue
        e = json.loads(line)
        if "input" not in e or "score" not in e:
            raise ValueError(f"{dump}: line {n + 1}: expected verl's validation fields 'input' and 'score', "
                             f"found {sorted(e)[:10]}")
        key = key_of.get(question_of_dump(e["input"]))
        if key is not None:
            out.setdefault(key, []).append(float(e["score"]))
    return out


def per_question_means(scores: dict[str, Sequence[float]]) -> dict[str, float]:
    return {k: sum(v) / len(v) for k, v in scores.items() if len(v)}


def paired_difference(ours: dict[str, float], theirs: dict[str, float], n_boot: int = 2000, seed: int = 0) -> Interval:
    """Mean over shared questions of (ours - theirs), with a bootstrap interval over those questions."""
    shared = sorted(set(ours) & set(theirs))
    if not shared:
        raise ValueError("the two evaluations share no question")
    return bootstrap_interval([ours[k] - theirs[k] for k in shared], n_boot, seed)
