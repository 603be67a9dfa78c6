"""Offline rules as registered units, and the bad inputs of ``devenus transition`` (one test per class):
a threshold out of its declared range, evidence values that are not usable, a malformed provenance file,
an evidence folder without parts; and the audit recipe of docs/records.md."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures import cli, make_dataset, make_evidence

from devenus.online.config import MethodConfig, option
from devenus.records.evidence import EvidenceWriter, evidence_parts, provenance_path, read_evidence
from devenus.records.io import read_records
from devenus.records.versions import VersionError, read_manifest, sha256_file, verify_manifest
from devenus.transitions import TransitionError, build_transition, rules


@pytest.fixture()
def inputs(tmp_path):
    data = make_dataset(tmp_path / "d0.parquet")
    ev = make_evidence(tmp_path / "evidence", data)
    return data, ev


# ---- the registry ---------------------------------------------------------------------------------
@dataclass
class FlagConfig(MethodConfig):
    min_pass_rate: float = option(0.5, "majority pass rate of the proposal must be >= this", ge=0.0, le=1.0)


class FlagRule(rules.TransitionRule):
    """A rule only this test knows: labels an unlabeled row with a trapo2 proposal of rule 'flag'."""

    name = "flag"
    method = "trapo2"
    config_class = FlagConfig
    label_source = "annotated"  # one of the record contract's label sources

    proposal = {"majority_pass_rate": rules.Field("number", rules.RATE, column=True)}

    def check(self, proposal, row):
        rate = proposal["majority_pass_rate"]
        return None if rate >= self.config.min_pass_rate else f"rate {rate} < {self.config.min_pass_rate}"

    def fixable(self, row, truth, equivalent):
        return not row["extra_info"]["labeled"]


def test_a_rule_registered_here_is_applied_by_build_transition(inputs, tmp_path):
    data, ev = inputs
    with EvidenceWriter(ev, method="trapo2") as w:
        for key, rate in (("k3", 0.9), ("k5", 0.25)):
            w.append(key, 7, "proposal", majority_answer="x", majority_pass_rate=rate,
                     values={"rule": "flag", "after": f"flag-{key}"})
    rules.register(FlagRule)
    try:
        assert "flag" in rules.names() and rules.get("flag") is FlagRule
        assert rules.for_method("trapo2") == ["flag", "promote"]
        r = build_transition(data, ev, tmp_path / "d1.parquet", "flag", thresholds={"min_pass_rate": 0.5})
        m = read_manifest(tmp_path / "d1.parquet")
        rows = {x["extra_info"]["index"]: x for x in read_records(tmp_path / "d1.parquet")}
        assert (r.proposals, r.accepted, r.rejected) == (2, 1, 1)
        assert rows["k3"]["reward_model"]["ground_truth"] == "flag-k3" and rows["k3"]["extra_info"]["label_source"] == "annotated"
        assert [(f.key, f.why) for f in m.refusals] == [("k5", "rate 0.25 < 0.5")]
        assert m.rule == "transition-flag" and m.config["thresholds"] == {"min_pass_rate": 0.5}
        with pytest.raises(ValueError, match="rule .flag. is registered twice"):
            rules.register(type("Other", (FlagRule,), {}))
    finally:
        rules.unregister("flag")
    assert "flag" not in rules.names()


def test_builtin_rules_are_named_without_importing_their_methods():
    code = ("import sys; from devenus.transitions import rules; n = rules.names(); "
            "print(n, 'devenus.online.refine.trapo2' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['correct', 'promote'] False False"
    from devenus.online.refine.nl_olr2 import CorrectionThresholds, NLOLR2Config
    from devenus.online.refine.trapo2 import PromotionThresholds, TraPO2Config

    # the rule's config is the method config's own base: one declaration of each default
    assert rules.get("promote").config_class is PromotionThresholds and issubclass(TraPO2Config, PromotionThresholds)
    assert rules.get("correct").config_class is CorrectionThresholds and issubclass(NLOLR2Config, CorrectionThresholds)
    assert rules.method_rules() == {"nl_olr2": "correct", "trapo2": "promote"}
    with pytest.raises(TransitionError, match="unknown rule 'promot' \\(did you mean 'promote'\\?\\); the rules: correct, promote"):
        rules.get("promot")


# ---- class 1: a threshold out of the range its option declares -------------------------------------
@pytest.mark.parametrize("rule, key, value, message", [
    ("promote", "min_pass_rate", float("nan"), "min_pass_rate must be a finite number >= 0.0 and <= 1.0, got nan"),
    ("promote", "min_pass_rate", -1, "min_pass_rate must be a number >= 0.0 and <= 1.0, got -1"),
    ("promote", "min_pass_rate", 1.5, "min_pass_rate must be a number >= 0.0 and <= 1.0, got 1.5"),
    ("promote", "min_slope", float("inf"), "min_slope must be a finite number"),
    ("promote", "min_answered", 0, "min_answered must be an integer >= 1"),
    ("promote", "min_answered", 2.5, "rule 'promote': min_answered must be an integer >= 1, got 2.5"),
    ("correct", "min_margin", "abc", "rule 'correct': min_margin must be a number >= 0.0 and <= 1.0, got 'abc'"),
    ("promote", "min_pass_rat", 0.5, r"unknown key min_pass_rat \(did you mean min_pass_rate\?\); the keys .*: "
                                     "min_pass_rate, min_slope, min_answered"),
])
def test_a_threshold_outside_its_declared_range_is_refused(inputs, tmp_path, rule, key, value, message):
    data, ev = inputs
    with pytest.raises(TransitionError, match=message):
        build_transition(data, ev, tmp_path / "d1.parquet", rule, thresholds={key: value})
    assert not (tmp_path / "d1.parquet").exists()


def test_cli_refuses_nan_in_one_line(inputs, tmp_path):
    data, ev = inputs
    r = subprocess.run(cli(str(data), "--evidence", str(ev), "--rule", "promote", "--set", "min_pass_rate=.nan",
                           "--out", str(tmp_path / "d1.parquet")), capture_output=True, text=True)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: rule 'promote': min_pass_rate must be a finite number >= 0.0 and <= 1.0, got nan")
    assert not (tmp_path / "d1.parquet").exists()


# ---- class 1: evidence that is not what the trainer writes is refused; a valid proposal that fails is rejected --
def _raw_part(ev: Path, rows: list[dict], seq: int = 900) -> Path:
    """A part file written around EvidenceWriter's checks (what a foreign or damaged writer leaves)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from devenus.records.evidence import evidence_schema

    full = [{"round": 0, "majority_answer": None, "target_pass_rate": None, **r} for r in rows]
    path = ev / f"part-{seq:06d}-r0-s9-9.parquet"
    pq.write_table(pa.Table.from_pylist(full, schema=evidence_schema()), str(path))
    return path


PROMOTE = {"rule": "promote", "after": "1", "slope": 0.1, "answered": 3}
CORRECT = {"rule": "correct", "before": "9", "after": "4", "margins": [0.5, 0.5, 0.5], "candidate_pass_rate": 0.9,
           "label_pass_rate": 0.0}


def _row(method, key, values, **cols):
    text = values if isinstance(values, str) or values is None else json.dumps(values)
    return {"key": key, "step": 9, "kind": "proposal", "method": method, "majority_pass_rate": 0.9, "values": text,
            **cols}


@pytest.mark.parametrize("rule, row, field, found", [
    # the writer's checks, whatever the rule
    ("promote", _row("trapo2", "k1", [1, 2]), "values", "expected the JSON text of an object, found a list"),
    ("promote", _row("trapo2", "k1", '{"rule": promote}'), "values", "expected the JSON text of an object"),
    ("promote", _row("trapo2", "k1", '{"rule": "promote", "after": "1", "slope": NaN, "answered": 3}'), "values",
     "not JSON: NaN is not a JSON value"),
    ("promote", _row("trapo2", "k1", PROMOTE, majority_pass_rate=7.0), "majority_pass_rate",
     "expected a number in [0, 1] or None, found 7.0"),
    ("correct", _row("nl_olr2", "k4", CORRECT, majority_answer=None, kind=""), "kind", "expected a non-empty str"),
    ("promote", _row("trapo2", "k1", {"after": "1"}), "values.rule", "expected the name of the rule"),
    # the rule's proposal schema (what its method writes)
    ("promote", _row("trapo2", "k1", dict(PROMOTE, slope=[0.1])), "values.slope",
     "expected a finite number in [-1.0, 1.0], found [0.1]"),
    ("promote", _row("trapo2", "k1", dict(PROMOTE, slope="NaN")), "values.slope", "expected a finite number"),
    ("promote", _row("trapo2", "k1", dict(PROMOTE, slope=True)), "values.slope", "expected a finite number"),
    ("promote", _row("trapo2", "k1", dict(PROMOTE, slope=1.5)), "values.slope", "in [-1.0, 1.0], found 1.5"),
    ("promote", _row("trapo2", "k1", {k: v for k, v in PROMOTE.items() if k != "answered"}), "values.answered",
     "missing"),
    ("promote", _row("trapo2", "k1", dict(PROMOTE, answered=-1)), "values.answered", "expected an integer >= 0"),
    ("promote", _row("trapo2", "k1", dict(PROMOTE, after=["1"])), "values.after", "expected a non-empty str"),
    ("promote", _row("trapo2", "k1", PROMOTE, majority_pass_rate=None), "majority_pass_rate", "missing"),
    ("correct", _row("nl_olr2", "k4", dict(CORRECT, candidate_pass_rate=7.0)), "values.candidate_pass_rate",
     "expected a finite number in [0.0, 1.0], found 7.0"),
    ("correct", _row("nl_olr2", "k4", dict(CORRECT, margins=0.5)), "values.margins",
     "expected a non-empty list of numbers"),
    ("correct", _row("nl_olr2", "k4", dict(CORRECT, margins=[0.5, "x"])), "values.margins",
     "expected a finite number in [-1.0, 1.0], found 'x' (an item of the list)"),
    ("correct", _row("nl_olr2", "k4", {k: v for k, v in CORRECT.items() if k != "label_pass_rate"}),
     "values.label_pass_rate", "missing"),
])
def test_corrupt_evidence_is_refused_naming_part_row_and_field_and_nothing_is_written(inputs, tmp_path, rule, row,
                                                                                      field, found):
    data, ev = inputs
    part = _raw_part(ev, [_row(row["method"], "k3", PROMOTE if rule == "promote" else CORRECT), row])
    out = tmp_path / "d1.parquet"
    with pytest.raises(TransitionError) as e:
        build_transition(data, ev, out, rule)
    msg = str(e.value)
    assert msg.startswith(f"evidence part {part}: row 1 (key '{row['key']}'): {field}: ") and found in msg, msg
    assert "\n" not in msg and not list(tmp_path.glob("d1*"))  # no output, no manifest


def test_corrupt_evidence_through_the_cli_is_one_line(inputs, tmp_path):
    data, ev = inputs
    part = _raw_part(ev, [_row("trapo2", "k1", [1, 2])])
    r = subprocess.run(cli(str(data), "--evidence", str(ev), "--rule", "promote", "--out", str(tmp_path / "d1.parquet")),
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"error: evidence part {part}: row 0 (key 'k1'): values: expected the JSON text of an object, found a list: "
        f"'[1, 2]'; not what the trainer writes"], r.stderr
    assert not list(tmp_path.glob("d1*"))


def test_another_rules_proposal_of_the_same_method_is_not_checked_against_this_rules_schema(inputs, tmp_path):
    data, ev = inputs
    _raw_part(ev, [_row("trapo2", "k1", {"rule": "flag", "after": "x"})])  # (no slope: not promote's)
    r = build_transition(data, ev, tmp_path / "d1.parquet", "promote")
    assert r.accepted > 0


@pytest.mark.parametrize("rule, method, key, values, why", [
    ("promote", "trapo2", "k1", dict(PROMOTE, answered=1), "1 answered probe(s) < min_answered 2"),
    ("promote", "trapo2", "k1", dict(PROMOTE, slope=0.01), "slope 0.01 <= min_slope 0.02"),
    ("promote", "trapo2", "k3", dict(PROMOTE, after="3"), "the row is labeled already"),
    ("correct", "nl_olr2", "k4", dict(CORRECT, candidate_pass_rate=0.5), "candidate pass rate 0.5 < min_candidate_pass_rate"),
    ("correct", "nl_olr2", "k4", dict(CORRECT, before="7"), "the label changed since the proposal ('7' -> '9')"),
    ("correct", "nl_olr2", "k4", dict(CORRECT, margins=[0.5, 0.1]), "margins [0.5, 0.1] not all >= min_margin 0.3"),
])
def test_a_valid_proposal_that_fails_the_rule_is_a_rejection_in_the_manifest(inputs, tmp_path, rule, method, key,
                                                                             values, why):
    data, ev = inputs
    if key == "k3":
        key = "k2"  # an even row: labeled
    _raw_part(ev, [_row(method, key, values)])
    r = build_transition(data, ev, tmp_path / "d1.parquet", rule)
    m = read_manifest(tmp_path / "d1.parquet")
    refused = {f.key: f for f in m.refusals}
    assert refused[key].why.startswith(why) and refused[key].where == "proposal at step 9", refused[key].why
    assert key not in {c.key for c in m.changes} and r.accepted > 0  # the round's other proposals still count


def test_the_method_cannot_write_a_proposal_its_rule_would_refuse():
    from devenus.online.refine.nl_olr2 import NLOLR2, CorrectRule
    from devenus.online.rollouts import Visit

    m = NLOLR2()
    visit = Visit(step=1, labeled=True, target="9", majority="4", majority_pass_rate=0.9, target_pass_rate=0.0)
    m.propose("k4", visit, CorrectRule, before="9", after="4", margins=[0.5], candidate_pass_rate=0.9,
              label_pass_rate=0.0)
    with pytest.raises(ValueError, match="nl_olr2: proposal for key 'k4': values.candidate_pass_rate: expected a "
                                         "finite number in \\[0.0, 1.0\\], found 7.0"):
        m.propose("k4", visit, CorrectRule, before="9", after="4", margins=[0.5], candidate_pass_rate=7.0,
                  label_pass_rate=0.0)
    assert [r["kind"] for r in m.pop_evidence()] == ["proposal"]  # the bad one was not kept


# ---- class 3: a malformed provenance file -----------------------------------------------------------
@pytest.mark.parametrize("text, problem", [
    ("{not json", "not JSON"),
    ("[1, 2]", "a list, not an object"),
    ('{"round": 0, "datasets": ["d0.parquet"]}', "datasets\\[0\\]: 'd0.parquet'"),
    ('{"round": 0, "datasets": [{"name": "d0.parquet"}]}', "datasets\\[0\\]"),
    ('{"round": 0, "datasets": [{"name": "d0.parquet", "sha256": "abc", "rows": 3}]}', "datasets\\[0\\]"),
    ('{"round": 0, "datasets": []}', "datasets: \\[\\]"),
    ('{"datasets": []}', "round: None"),
])
def test_a_malformed_provenance_file_is_one_error_line(inputs, tmp_path, text, problem):
    data, ev = inputs
    provenance_path(ev, 0).write_text(text)
    with pytest.raises(TransitionError, match=f"dataset-r0.json is not a provenance file: {problem}") as e:
        build_transition(data, ev, tmp_path / "d1.parquet", "promote")
    assert "\n" not in str(e.value)
    r = subprocess.run(cli(str(data), "--evidence", str(ev), "--rule", "promote", "--out", str(tmp_path / "d1.parquet")),
                       capture_output=True, text=True)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


# ---- class 4: an evidence folder without parts -------------------------------------------------------
def test_an_evidence_folder_without_parts_of_the_round_is_an_error(inputs, tmp_path):
    data, ev = inputs
    for p in evidence_parts(ev, 0):
        p.unlink()
    r = subprocess.run(cli(str(data), "--evidence", str(ev), "--rule", "promote", "--out", str(tmp_path / "d1.parquet")),
                       capture_output=True, text=True)
    assert r.returncode == 1 and "error: no evidence part of round 0 in" in r.stderr
    assert not (tmp_path / "d1.parquet").exists()
    # parts of another round are not this round's evidence either
    from devenus.records.evidence import record_dataset

    record_dataset(ev, [str(data)], 1)
    with EvidenceWriter(ev, method="trapo2", round=1) as w:
        w.append("k1", 1, "visit", majority_answer="1", majority_pass_rate=1.0)
    with pytest.raises(TransitionError, match="no evidence part of round 0"):
        build_transition(data, ev, tmp_path / "d1.parquet", "promote")
    assert len(evidence_parts(ev, 1)) == 1 and evidence_parts(ev, 0) == []


# ---- class 7: the audit recipe of docs/records.md ----------------------------------------------------
def test_the_audit_recipe_of_docs_records_holds(inputs, tmp_path):
    data, ev = inputs
    d1 = tmp_path / "d1.parquet"
    build_transition(data, ev, d1, "promote")
    parts = evidence_parts(ev, 0)
    assert len(parts) == 2  # trapo2's and nl_olr2's part: the reader reads every part of the round
    m = verify_manifest(d1, parents=[data, *parts])  # the files are the ones the decision used
    assert [(p.name, p.sha256) for p in m.parents] == [(f.name, sha256_file(f)) for f in (data, *parts)]
    change = next(c for c in m.changes if c.key == "k1" and c.field == "reward_model.ground_truth")
    why = json.loads(change.why)
    behind = read_evidence(ev, keys=["k1"], round=0)  # the observations behind the change
    deciding = [e for e in behind if e["kind"] == "proposal" and e["step"] == why["step"]]
    assert len(deciding) == 1 and deciding[0]["values"]["after"] == change.after
    # re-running the rule with the manifest's config on the same parents gives the same bytes
    again = tmp_path / "again" / "d1.parquet"
    build_transition(data, ev, again, m.config["rule"], round=m.config["round"], thresholds=m.config["thresholds"])
    assert again.read_bytes() == d1.read_bytes()
    # an evidence part changed after the transition: the audit says which
    with EvidenceWriter(ev, method="trapo2") as w:
        w.append("k1", 99, "visit", majority_answer="1", majority_pass_rate=1.0)
    new_part = evidence_parts(ev, 0)[-1]
    parts[0].write_bytes(new_part.read_bytes())
    with pytest.raises(VersionError, match=f"parent .*{parts[0].name} does not match"):
        verify_manifest(d1, parents=[data, *parts])


def test_an_evidence_part_is_never_the_output(inputs):
    data, ev = inputs
    part = evidence_parts(ev, 0)[0]
    before = part.read_bytes()
    with pytest.raises(VersionError, match="is the input"):
        build_transition(data, ev, part, "promote", force=True)
    assert part.read_bytes() == before
