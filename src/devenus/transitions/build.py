"""The transition builder: D(k) + the evidence of round k + a rule -> D(k+1) with its manifest.

Rules (each reads the ``proposal`` rows one method wrote, and re-checks them against thresholds given
here, so an offline run can be stricter than the online one):

- ``promote`` (TraPO v2 proposals): an unlabeled row gets the proposed answer as its target
  (``extra_info.labeled`` -> true, ``label_source`` -> ``promoted``). Thresholds: ``min_pass_rate``
  (majority pass rate at the proposal), ``min_slope`` (its slope, strict).
- ``correct`` (NL-OLR v2 proposals): a labeled row's target is replaced by the proposed answer
  (``label_source`` -> ``corrected``). Thresholds: ``min_candidate_pass_rate``, ``max_label_pass_rate``,
  ``min_margin`` (every margin of the proposal's last visits).

Per key the latest proposal (highest step) decides. A proposal that fails a threshold, or whose row is no
longer in the state it was made for (a promotion of a row that is now labeled, a correction of a label
that changed), is not applied and is listed in the manifest's refusals with the reason.

Refused as a whole, before anything is written: evidence rows of the round whose keys are not in D(k),
and evidence collected on another dataset (its recorded parent hash is not D(k)'s sha256).

Deterministic and idempotent: the output depends only on D(k)'s bytes, the proposals and the config
(rows keep D(k)'s order; changes are sorted by key); it is written through
:func:`devenus.records.versions.write_version` (both files complete in temporary files, then renamed),
so a kill leaves D(k) untouched and a rerun writes the byte-identical D(k+1).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from devenus.records.evidence import read_evidence
from devenus.records.io import read_records
from devenus.records.versions import Change, Manifest, Refusal, parent_of, write_version
from devenus.transitions.evidence import EvidenceProvenanceError, read_provenance

EPS = 1e-9
#: rule -> the method whose proposals it applies
RULE_METHODS = {"promote": "trapo2", "correct": "nl_olr2"}


class TransitionError(ValueError):
    """Inputs a transition refuses as a whole."""


@dataclass(frozen=True)
class PromoteConfig:
    min_pass_rate: float = 0.75
    min_slope: float = 0.02


@dataclass(frozen=True)
class CorrectConfig:
    min_candidate_pass_rate: float = 0.75
    max_label_pass_rate: float = 0.25
    min_margin: float = 0.3


CONFIGS = {"promote": PromoteConfig, "correct": CorrectConfig}


@dataclass
class TransitionResult:
    manifest: Manifest
    proposals: int = 0
    accepted: int = 0
    rejected: int = 0
    #: with simulation truth: accepted changes whose new target is the hidden answer / accepted, and / the
    #: rows the rule could fix (promote: unlabeled rows; correct: labeled rows whose label is not the truth)
    precision: float | None = None
    recall: float | None = None


def rule_config(rule: str, values: dict[str, Any] | None = None):
    if rule not in CONFIGS:
        raise TransitionError(f"unknown rule {rule!r}; known: {sorted(CONFIGS)}")
    cls = CONFIGS[rule]
    values = dict(values or {})
    known = set(cls.__dataclass_fields__)
    bad = sorted(set(values) - known)
    if bad:
        raise TransitionError(f"rule {rule!r} has no threshold {bad[0]!r}; its thresholds: {sorted(known)}")
    out = {}
    for k, v in values.items():
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            raise TransitionError(f"threshold {k} of rule {rule!r}: expected a number, found {v!r}") from None
    return cls(**out)


def _check_proposal(rule: str, cfg, p: dict[str, Any], row: dict[str, Any]) -> str | None:
    """Why the proposal ``p`` cannot be applied to ``row`` (None: it can)."""
    v, ei, gt = p["values"], row["extra_info"], row["reward_model"]["ground_truth"]
    after = v.get("after")
    if not isinstance(after, str) or not after.strip():
        return "the proposal names no answer"
    if rule == "promote":
        if ei.get("labeled"):
            return "the row is labeled already"
        if (p["majority_pass_rate"] or 0.0) < cfg.min_pass_rate - EPS:
            return f"majority pass rate {p['majority_pass_rate']} < min_pass_rate {cfg.min_pass_rate}"
        if not float(v.get("slope", 0.0)) > cfg.min_slope + EPS:
            return f"slope {v.get('slope')} <= min_slope {cfg.min_slope}"
        return None
    if not ei.get("labeled"):
        return "the row is unlabeled (nothing to correct)"
    if v.get("before") != gt:
        return f"the label changed since the proposal ({v.get('before')!r} -> {gt!r})"
    if after == gt:
        return "the proposal equals the label"
    if (v.get("candidate_pass_rate") or 0.0) < cfg.min_candidate_pass_rate - EPS:
        return f"candidate pass rate {v.get('candidate_pass_rate')} < min_candidate_pass_rate {cfg.min_candidate_pass_rate}"
    lpr = v.get("label_pass_rate")
    if lpr is None or lpr > cfg.max_label_pass_rate + EPS:
        return f"label pass rate {lpr} > max_label_pass_rate {cfg.max_label_pass_rate}"
    margins = v.get("margins") or []
    if not margins or min(margins) < cfg.min_margin - EPS:
        return f"margins {margins} not all >= min_margin {cfg.min_margin}"
    return None


def _summary(p: dict[str, Any], n: int, rule: str) -> str:
    """The evidence behind one change, as one sorted JSON line (the manifest's ``why``)."""
    v = {k: p["values"][k] for k in sorted(p["values"]) if k not in ("after", "before", "field", "rule")}
    return json.dumps({"rule": rule, "method": p["method"], "round": p["round"], "step": p["step"], "proposals": n,
                       "majority_pass_rate": p["majority_pass_rate"], "target_pass_rate": p["target_pass_rate"],
                       "values": v}, sort_keys=True, allow_nan=False)


def build_transition(data: str | os.PathLike[str], evidence: str | os.PathLike[str], out: str | os.PathLike[str],
                     rule: str, *, round: int = 0, thresholds: dict[str, Any] | None = None,
                     force: bool = False) -> TransitionResult:
    """Write D(k+1) = ``out`` from D(k) = ``data`` and the evidence directory; see the module docstring."""
    cfg = rule_config(rule, thresholds)
    method = RULE_METHODS[rule]
    parent = parent_of(data)
    try:
        prov = read_provenance(evidence, round)
    except EvidenceProvenanceError as exc:
        raise TransitionError(str(exc)) from None
    if parent.sha256 not in {p["sha256"] for p in prov["datasets"]}:
        raise TransitionError(
            f"evidence in {evidence} (round {round}) was collected on {[p['name'] for p in prov['datasets']]} "
            f"(sha256 {[p['sha256'][:12] for p in prov['datasets']]}), not on {parent.name} (sha256 "
            f"{parent.sha256[:12]}): its parent hash differs")
    rows = read_records(data)
    by_key = {r["extra_info"]["index"]: i for i, r in enumerate(rows)}
    observed = read_evidence(evidence, round=round, method=method)
    unknown = sorted({e["key"] for e in observed if e["key"] not in by_key})
    if unknown:
        raise TransitionError(f"{len(unknown)} evidence key(s) of round {round} are not in {parent.name}, e.g. "
                              f"{unknown[:3]}: this evidence belongs to another dataset")
    proposals: dict[str, list[dict[str, Any]]] = {}
    for e in observed:
        if e["kind"] == "proposal" and e["values"].get("rule") == rule:
            proposals.setdefault(e["key"], []).append(e)
    changes: list[Change] = []
    refusals: list[Refusal] = []
    out_rows = rows
    for key in sorted(proposals):
        ps = sorted(proposals[key], key=lambda e: e["step"])
        p = ps[-1]
        i = by_key[key]
        why_not = _check_proposal(rule, cfg, p, rows[i])
        if why_not is not None:
            refusals.append(Refusal(where=f"proposal at step {p['step']}", field="reward_model.ground_truth",
                                    why=why_not, key=key))
            continue
        if out_rows is rows:
            out_rows = list(rows)  # copy on first change: D(k)'s rows stay as read
        new = copy.deepcopy(rows[i])
        new["reward_model"]["ground_truth"] = p["values"]["after"]
        new["extra_info"]["labeled"] = True
        new["extra_info"]["label_source"] = "promoted" if rule == "promote" else "corrected"
        why = _summary(p, len(ps), rule)
        for f_, before, after in (("reward_model.ground_truth", rows[i]["reward_model"]["ground_truth"], new["reward_model"]["ground_truth"]),
                                  ("extra_info.labeled", rows[i]["extra_info"]["labeled"], True),
                                  ("extra_info.label_source", rows[i]["extra_info"]["label_source"], new["extra_info"]["label_source"])):
            if before != after:
                changes.append(Change(key, f_, before, after, why))
        out_rows[i] = new
    digest = hashlib.sha256(json.dumps([proposals[k] for k in sorted(proposals)], sort_keys=True,
                                       default=str).encode()).hexdigest()
    config = {"rule": rule, "method": method, "round": round, "thresholds": asdict(cfg),
              "evidence": {"proposal_keys": len(proposals), "sha256": digest}}
    manifest = write_version(out_rows, out, rule=f"transition-{rule}", config=config, parent=[parent], changes=changes,
                             refusals=refusals, force=force, inputs=[data])
    precision, recall = _truth(rule, rows, out_rows, {c.key for c in changes}, by_key)
    return TransitionResult(manifest, proposals=len(proposals), accepted=len({c.key for c in changes}),
                            rejected=len(refusals), precision=precision, recall=recall)


def _truth(rule: str, before: list, after: list, changed: set[str], by_key: dict[str, int]):
    """(precision, recall) of the accepted changes against ``simulation.hidden_answer`` (None without it)."""
    from devenus.verify import get_default_verifier

    v = get_default_verifier()
    hidden = [(r.get("simulation") or {}).get("hidden_answer") for r in before]
    if all(h is None for h in hidden):
        return None, None

    def wrong(r, h):  # the row's target does not give the truth: what the rule is there to fix
        gt = r["reward_model"]["ground_truth"]
        return not r["extra_info"]["labeled"] if rule == "promote" else bool(r["extra_info"]["labeled"] and not v.equivalent(gt, h))

    fixable = sum(1 for r, h in zip(before, hidden) if h is not None and wrong(r, h))
    right = sum(1 for k in changed if hidden[by_key[k]] is not None
                and v.equivalent(after[by_key[k]]["reward_model"]["ground_truth"], hidden[by_key[k]]))
    judged = sum(1 for k in changed if hidden[by_key[k]] is not None)
    return (right / judged if judged else None), (right / fixable if fixable else None)
