"""Which dataset an evidence table was collected on: ``dataset-r<round>.json`` beside its part files.

The trainer records it when it writes a round's first evidence (name, sha256 and rows of each training
file, :func:`devenus.records.versions.parent_of`); the transition builder refuses evidence whose
recorded parent hash is not D(k)'s. Written atomically; a second run on the same round and the same
data finds the same content, on other data it is refused (one evidence directory per dataset round).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from devenus.records.evidence import _parts
from devenus.records.io import commit_temp, discard_temp, temp_path
from devenus.records.versions import parent_of


class EvidenceProvenanceError(ValueError):
    """Evidence that does not belong to the dataset it is used with."""


def provenance_path(folder: str | os.PathLike[str], round: int) -> Path:
    return Path(folder) / f"dataset-r{round}.json"


def record_dataset(folder: str | os.PathLike[str], train_files: list[str], round: int) -> Path:
    """Write (or check) the provenance of round ``round``'s evidence under ``folder``."""
    parents = [parent_of(f).to_json() for f in train_files]
    doc = {"round": round, "datasets": parents}
    path = provenance_path(folder, round)
    if path.exists():
        have = read_provenance(folder, round)
        if have != doc:
            raise EvidenceProvenanceError(
                f"{path} records round {round} on {[p['name'] for p in have['datasets']]} "
                f"(sha256 {[p['sha256'][:12] for p in have['datasets']]}), this run trains on "
                f"{[p['name'] for p in parents]} (sha256 {[p['sha256'][:12] for p in parents]}): use another "
                f"devenus.evidence_dir or devenus.round")
        return path
    tmp = temp_path(path)
    try:
        tmp.write_text(json.dumps(doc, sort_keys=True, indent=1) + "\n", encoding="utf-8")
        commit_temp(tmp, path)
    except BaseException:
        discard_temp(tmp)
        raise
    return path


def read_provenance(folder: str | os.PathLike[str], round: int) -> dict[str, Any]:
    """The provenance of round ``round`` under ``folder``; missing or malformed is one
    :class:`EvidenceProvenanceError` line naming the file and what was expected."""
    path = provenance_path(folder, round)
    if not path.is_file():
        raise EvidenceProvenanceError(f"no {path.name} in {folder}: which dataset this evidence was collected on is "
                                      f"unknown (it is written by the trainer with the first evidence of a round)")
    want = ('expected {"round": <int>, "datasets": [{"name": <str>, "sha256": <64 hex>, "rows": <int|null>}, ...]}')
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise EvidenceProvenanceError(f"{path} is not a provenance file: not JSON ({exc}); {want}") from None
    problem = _provenance_problem(doc)
    if problem:
        raise EvidenceProvenanceError(f"{path} is not a provenance file: {problem}; {want}")
    return {"round": doc["round"], "datasets": [dict(p) for p in doc["datasets"]]}


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _provenance_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"a {type(doc).__name__}, not an object"
    if isinstance(doc.get("round"), bool) or not isinstance(doc.get("round"), int):
        return f"round: {doc.get('round')!r:.40}"
    ds = doc.get("datasets")
    if not isinstance(ds, list) or not ds:
        return f"datasets: {ds!r:.40}"
    for i, p in enumerate(ds):
        if not isinstance(p, dict):
            return f"datasets[{i}]: {p!r:.40}"
        rows = p.get("rows")
        if (not isinstance(p.get("name"), str) or not isinstance(p.get("sha256"), str)
                or not _SHA256.fullmatch(p["sha256"])
                or not (rows is None or (isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0))):
            return f"datasets[{i}]: {json.dumps(p)[:80]}"
    return None


def evidence_parts(folder: str | os.PathLike[str], round: int) -> list[Path]:
    """The evidence part files of round ``round`` under ``folder``, in the order the reader reads them
    (:func:`devenus.records.evidence.evidence_table` reads every part of the round, whatever its method)."""
    tag = re.compile(rf"^part-\d+-r{round}-s")
    return [p for _, p in _parts(Path(folder)) if tag.match(p.name)]
