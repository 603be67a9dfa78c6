"""The transition builder: D(k) + the evidence of round k + a rule -> D(k+1) with its manifest.

A rule (:mod:`devenus.transitions.rules`; ``promote`` for TraPO v2's proposals, ``correct`` for NL-OLR v2's)
reads the ``proposal`` rows its method wrote and re-checks them against its config (the method's own
thresholds, defaults included, so an offline run can be stricter than the online one). Per key the latest
proposal (highest step) decides. A proposal that fails a threshold, or whose row is no longer in the state
it was made for (a promotion of a row that is now labeled, a correction of a label that changed), is not
applied and is listed in the manifest's refusals with the reason; the other proposals of the round still count.

Refused as a whole, before anything is written: an evidence directory with no part of round k, evidence
rows of the round whose keys are not in D(k), evidence collected on another dataset (its recorded parent
hash is not D(k)'s sha256), a missing or malformed ``dataset-r<k>.json``, and corrupt evidence: a row of
the rule's method that is not what the trainer writes (:class:`~devenus.records.evidence.EvidenceWriter`'s
checks: ``values`` the JSON text of an object, pass rates in [0, 1], ...), or a proposal of the rule outside
its schema (:meth:`~devenus.transitions.rules.TransitionRule.proposal_fields`: a pass rate of 7.0, a slope
that is a list, a missing number); the error names the part file, the row and the field. The manifest's parents are
D(k) and every evidence part of the round that was read, each with its sha256 (docs/records.md, auditing).

Deterministic and idempotent: the output depends only on D(k)'s bytes, the proposals and the config
(rows keep D(k)'s order; changes are sorted by key); it is written through
:func:`devenus.records.versions.write_version` (both files complete in temporary files, then renamed),
so a kill leaves D(k) untouched and a rerun writes the byte-identical D(k+1).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from devenus.records.evidence import (EvidenceError, EvidenceProvenanceError, evidence_parts, read_evidence,
                                      read_provenance)
from devenus.records.io import read_records_table
from devenus.records.versions import Manifest, Refusal, parent_of, write_version
from devenus.transitions import rules
from devenus.transitions.rules import TransitionError, rule_config


@dataclass
class TransitionResult:
    manifest: Manifest
    proposals: int = 0
    accepted: int = 0
    rejected: int = 0
    #: with simulation truth: accepted changes whose new target is the hidden answer / accepted, and / the
    #: rows the rule could fix (:meth:`TransitionRule.fixable`)
    precision: float | None = None
    recall: float | None = None


def build_transition(data: str | os.PathLike[str], evidence: str | os.PathLike[str], out: str | os.PathLike[str],
                     rule: str, *, round: int = 0, thresholds: dict[str, Any] | None = None,
                     force: bool = False) -> TransitionResult:
    """Write D(k+1) = ``out`` from D(k) = ``data`` and the evidence directory; see the module docstring."""
    rule = rules.get(rule)(rule_config(rule, thresholds))
    parent = parent_of(data)
    parts = _round_parts(evidence, round, parent)
    table = read_records_table(data)
    rows = table.to_pylist()
    by_key = {r["extra_info"]["index"]: i for i, r in enumerate(rows)}
    proposals = _proposals(evidence, round, rule, by_key, parent.name)
    out_table, changes, refusals, answers = _apply(rule, table, rows, by_key, proposals)
    digest = hashlib.sha256(json.dumps([proposals[k] for k in sorted(proposals)], sort_keys=True,
                                       default=str).encode()).hexdigest()
    config = {"rule": rule.name, "method": rule.method, "round": round, "thresholds": asdict(rule.config),
              "evidence": {"proposal_keys": len(proposals), "sha256": digest}}
    # every input is a parent (hashed: the audit recipe re-verifies them) and an input the output may not be
    manifest = write_version(out_table, out, rule=f"transition-{rule.name}", config=config,
                             parent=[parent, *parts], changes=changes, refusals=refusals, force=force,
                             inputs=[data, *parts])
    changed = set(changes.column("key").to_pylist())
    precision, recall = _truth(rule, rows, {k: answers[k] for k in changed}, by_key)
    return TransitionResult(manifest, proposals=len(proposals), accepted=len(changed),
                            rejected=len(refusals), precision=precision, recall=recall)


def _round_parts(evidence: str | os.PathLike[str], round: int, parent) -> list:
    """The evidence parts of round ``round``, refused as a whole when the round was collected on another
    dataset than ``parent`` (its recorded parent hash differs) or wrote no part."""
    try:
        prov = read_provenance(evidence, round)
    except EvidenceProvenanceError as exc:
        raise TransitionError(str(exc)) from None
    if parent.sha256 not in {p["sha256"] for p in prov["datasets"]}:
        raise TransitionError(
            f"evidence in {evidence} (round {round}) was collected on {[p['name'] for p in prov['datasets']]} "
            f"(sha256 {[p['sha256'][:12] for p in prov['datasets']]}), not on {parent.name} (sha256 "
            f"{parent.sha256[:12]}): its parent hash differs")
    parts = evidence_parts(evidence, round)
    if not parts:
        raise TransitionError(f"no evidence part of round {round} in {evidence} (part-*-r{round}-*.parquet): "
                              f"nothing to apply; did the round's training write its evidence there?")
    return parts


def _proposals(evidence: str | os.PathLike[str], round: int, rule: rules.TransitionRule, by_key: dict[str, int],
               parent_name: str) -> dict[str, list[dict[str, Any]]]:
    """The round's proposals for ``rule`` by key, read with the writer's checks and the rule's schema;
    corrupt evidence, or a key not in D(k), refuses the round as a whole."""
    fields = rule.proposal_fields()

    def schema(e: dict[str, Any]):  # this rule's proposals: as its method writes them (other rows: the writer's checks)
        if e["kind"] != "proposal":
            return None
        name = e["values"].get("rule")
        if not isinstance(name, str) or not name:
            return "values.rule", f"expected the name of the rule the proposal is for, found {name!r:.40}"
        return rules.proposal_problem(fields, e) if name == rule.name else None

    try:
        observed = read_evidence(evidence, round=round, method=rule.method, check=schema)
    except EvidenceError as exc:  # corrupt evidence: refused as a whole, nothing written
        raise TransitionError(str(exc)) from None
    unknown = sorted({e["key"] for e in observed if e["key"] not in by_key})
    if unknown:
        raise TransitionError(f"{len(unknown)} evidence key(s) of round {round} are not in {parent_name}, e.g. "
                              f"{unknown[:3]}: this evidence belongs to another dataset")
    proposals: dict[str, list[dict[str, Any]]] = {}
    for e in observed:
        if e["kind"] == "proposal" and e["values"]["rule"] == rule.name:
            proposals.setdefault(e["key"], []).append(e)
    return proposals


def _apply(rule: rules.TransitionRule, table, rows: list, by_key: dict[str, int],
           proposals: dict[str, list[dict[str, Any]]]) -> tuple[Any, Any, list[Refusal], dict[str, str]]:
    """D(k+1)'s table, its change lines (by key), the refusals and the accepted answers by key: per key
    (sorted) the latest proposal decides (:meth:`~rules.TransitionRule.check`), and the accepted ones
    are applied as one table edit (:meth:`~rules.TransitionRule.apply`)."""
    import pyarrow.compute as pc

    refusals: list[Refusal] = []
    accepted: dict[int, tuple[dict[str, Any], str]] = {}
    for key in sorted(proposals):
        ps = sorted(proposals[key], key=lambda e: e["step"])
        p = ps[-1]
        i = by_key[key]
        why_not = rule.check(p, rows[i])
        if why_not is not None:
            refusals.append(Refusal(where=f"proposal at step {p['step']}", field="reward_model.ground_truth",
                                    why=why_not, key=key))
            continue
        accepted[i] = p, rule.summary(p, len(ps))
    out, changes = rule.apply(table, accepted)
    changes = changes.take(pc.sort_indices(changes, [("key", "ascending")]))  # (stable: a row's fields stay sorted)
    return out, changes, refusals, {rows[i]["extra_info"]["index"]: p["values"]["after"] for i, (p, _) in accepted.items()}


def _truth(rule: rules.TransitionRule, before: list, after: dict[str, str], by_key: dict[str, int]):
    """(precision, recall) of the accepted changes (``after``: each changed key's new target) against
    ``simulation.hidden_answer`` (None without it)."""
    from devenus.verify import get_default_verifier

    v = get_default_verifier()
    hidden = [(r.get("simulation") or {}).get("hidden_answer") for r in before]
    if all(h is None for h in hidden):
        return None, None

    fixable = sum(1 for r, h in zip(before, hidden) if h is not None and rule.fixable(r, h, v.equivalent))
    right = sum(1 for k, gt in after.items() if hidden[by_key[k]] is not None and v.equivalent(gt, hidden[by_key[k]]))
    judged = sum(1 for k in after if hidden[by_key[k]] is not None)
    return (right / judged if judged else None), (right / fixable if fixable else None)
