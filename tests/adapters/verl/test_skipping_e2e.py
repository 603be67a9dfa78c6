"""Skipping before rollout end to end through ``python -m devenus.train`` on the testbed: GRPO with
``devenus.skip`` on (GRESO's rule; exploration probability 0.05 and no adaptation, so a prompt with one
zero-variance visit is skipped with probability 0.95) over 8 training rows, 4 prompts x 3 rollouts a step
over 2 agent-loop workers (verl splits each generate call evenly: an odd number of kept prompts, 3k rows,
failed verl's chunk assertion before the granule), 4 steps (every row is revisited), a checkpoint at step 3
(within the second epoch, where verl's dataloader resumes to the same batch), then a resume from it.

Shows: prompts are skipped once they have a zero-variance history and their rollouts are never generated
(their slots are refilled from further prompts), every generate call keeps an even number of prompts
(skipped ones generated back where needed), the skips are in the evidence table, and (extended) a
resumed run decides the same skips as the run that never stopped. The default suite's resume through the
same sampling state file is tests/adapters/verl/test_sampling_e2e.py's (the refill cursor; the skip
rule's own state_dict round trip is tests/online/test_skipping.py's).
"""

from __future__ import annotations

import time

import pytest

from devenus.records.evidence import read_evidence
from devenus.runs.testbed import RunConfig, evidence_dir
from e2e import train, train_steps

PROMPTS, N, WORKERS = 4, 3, 2  # refill_granule(2 workers, 3 rollouts) = 2 prompts
KEYS = ("+devenus.skip.enabled=true", "+devenus.skip.p_easy=0.05", "+devenus.skip.p_hard=0.05",
        "+devenus.skip.step_size=0")


@pytest.fixture(scope="module")
def eight_rows(base_testbed, tmp_path_factory):
    from devenus.records.io import read_records
    from devenus.records.versions import write_version

    path = tmp_path_factory.mktemp("skip_data") / "train.parquet"
    write_version(read_records(base_testbed.split("train"))[:8], path, rule="test")
    return path


def _cfg(data):
    return RunConfig(method="grpo", steps=4, prompts_per_step=PROMPTS, rollouts_per_prompt=N, save_freq=3,
                     train_file=str(data), val_before_train=False, extra_overrides=("trainer.test_freq=-1",
                                                                 f"actor_rollout_ref.rollout.agent.num_workers={WORKERS}"))


def _skips(out, steps, call: int | None = None) -> dict[int, list[str]]:
    """Skipped keys per step (``call``: only those of one generation call, 0 = the step's own prompts)."""
    rows = [r for r in read_evidence(evidence_dir(out), kind="skip") if (r.get("values") or {}).get("event") == "skipped"]
    return {s: sorted(r["key"] for r in rows if r["step"] == s and call in (None, r["values"]["call"])) for s in steps}


@pytest.fixture(scope="module")
def full_run(base_testbed, eight_rows, tmp_path_factory):
    """The uninterrupted run (both tests read it; one launch)."""
    out = tmp_path_factory.mktemp("skip_run")
    t0 = time.perf_counter()
    full = train(base_testbed, out / "full", _cfg(eight_rows), *KEYS, timeout=900)
    return out, full, time.perf_counter() - t0


@pytest.mark.slow
def test_skipping_skips_zero_variance_history(full_run):
    out, full, wall = full_run
    assert full.ok, full.tail(60)
    steps = train_steps(full)
    assert sorted(steps) == [1, 2, 3, 4]
    assert steps[1]["devenus/skip/skipped"] == 0  # no history yet: nothing to skip
    skipped = {s: int(m["devenus/skip/skipped"]) for s, m in steps.items()}
    assert sum(skipped.values()) > 0, "the base model gives all-wrong groups: their revisits should be skipped"
    for s, m in steps.items():
        # a skipped prompt generates nothing; its slot is filled (unfiltered at the last round if need be)
        assert m["devenus/sampling/groups_placeholder"] == skipped[s]
        assert m["devenus/sampling/slots_unfilled"] == 0 or m["devenus/sampling/groups_zero_variance"] > 0
    evidence = _skips(out / "full", steps)
    assert {s: len(k) for s, k in evidence.items()} == skipped  # every skip is in the evidence table
    # the step's own call keeps a multiple of the granule (2 prompts); the seeded draws need it at least once
    own = {s: PROMPTS - len(k) for s, k in _skips(out / "full", steps, call=0).items()}
    assert all(k % 2 == 0 for k in own.values()), own
    kept_back = {s: int(m["devenus/skip/kept_for_granule"]) for s, m in steps.items()}
    assert sum(kept_back.values()) > 0, kept_back
    # the audit (default devenus.skip.audit_rate 0.05): its counts every step, its precision where it audited
    audited = {s: int(m["devenus/skip/audited"]) for s, m in steps.items()}
    for s, m in steps.items():
        assert ("devenus/skip/precision" in m) == (audited[s] > 0)
        if audited[s]:
            assert m["devenus/skip/precision"] == pytest.approx(m["devenus/skip/audited_zero_variance"] / audited[s])
    print(f"\nskipping e2e: skipped per step {skipped}; generated back for the granule {kept_back}; "
          f"own prompts kept {own}; audited {audited}; run {wall:.0f} s")


@pytest.mark.slow
@pytest.mark.extended  # the default suite resumes the same sampling state file in test_sampling_e2e.py
def test_a_resumed_run_skips_the_same(base_testbed, eight_rows, full_run):
    out, full, _ = full_run
    assert full.ok, full.tail(60)
    t1 = time.perf_counter()
    resumed = train(base_testbed, out / "resumed", _cfg(eight_rows), *KEYS, "trainer.resume_mode=resume_path",
                    f"trainer.resume_from_path={out / 'full' / 'checkpoints' / 'global_step_3'}", timeout=900)
    assert resumed.ok, resumed.tail(60)
    assert "restored the skip histories" in resumed.output()
    later = train_steps(resumed)
    assert sorted(later) == [4]
    # step 4's own prompts are decided from the restored histories alone: the same skips
    first = _skips(out / "full", [4], call=0)
    assert first[4], "the uninterrupted run skips some of step 4's own prompts (seeded: the same every run)"
    assert _skips(out / "resumed", [4], call=0) == first
    print(f"\nskipping resume: step 4 (own prompts) {first[4]}; all of step 4: full {_skips(out / 'full', [4])} "
          f"resumed {_skips(out / 'resumed', [4])}; resume {time.perf_counter() - t1:.0f} s")
