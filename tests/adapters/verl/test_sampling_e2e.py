"""Dynamic sampling with refill end to end through ``python -m devenus.train`` on the testbed: GRPO with a
test-only pre-rollout filter (plugin ``skip_second_prompt``: the second prompt of every generation is skipped,
so every step has a placeholder slot) and ``devenus.dynamic_sampling`` on; 16 training rows, 4 prompts x 4
rollouts a step, 3 steps, a checkpoint at step 2, then a resume from it.

Shows: zero-variance groups are refilled (refill rounds > 0, groups kept rise), the placeholder slot is always
filled, a step whose empty slots were all filled trains on informative groups only, the rollouts counted in
``devenus/rollouts/generated`` are every response generated, and a resumed run refills the same prompts.
The extended tier adds GeoMin, whose surfaces wait for the log-prob pass (refill groups get their own pass).
Both record verl's memory protocol through the ``protocol_spy`` plugin: no log-prob pass while the replicas
are awake, each refill round in verl's own order, and every extra wake (a weight sync the rollout server
received, with the step's own weights) counted in ``devenus/sampling/extra_weight_syncs``.
"""

from __future__ import annotations

import re
import time

import pytest

from devenus.online.sampling.dynamic_sampling import refill_size
from devenus.runs.testbed import RunConfig
from e2e import train, train_steps
from verl_cpu_fixtures import parse_weight_syncs

PROMPTS, N = 4, 4
KEYS = ("+devenus.dynamic_sampling.enabled=true", "+devenus.dynamic_sampling.max_refill_rounds=3",
        "devenus.plugins=[skip_second_prompt,protocol_spy]")
SPY = re.compile(r"\[protocol-spy\] (\w+) step=(\d+)")


@pytest.fixture(scope="module")
def small_train(base_testbed, tmp_path_factory):
    from devenus.records.io import read_records
    from devenus.records.labels import hide_labels
    from devenus.records.versions import write_version

    d = tmp_path_factory.mktemp("sampling_data")
    rows = read_records(base_testbed.split("train"))[:16]
    write_version(rows, d / "train.parquet", rule="test")
    write_version(hide_labels(rows, 0.5, 0), d / "semi.parquet", rule="test")
    return d / "train.parquet"


def _cfg(data):
    return RunConfig(method="test_filtered_grpo", steps=3, prompts_per_step=PROMPTS, rollouts_per_prompt=N,
                     save_freq=2, train_file=str(data), val_before_train=False,
                     extra_overrides=("trainer.test_freq=-1",))


def _refills(output: str, step: int) -> list[str]:
    return re.findall(rf"\[devenus\] step {step} refill: .*", output)


def _round_sizes(output: str, step: int) -> list[tuple[int, bool]]:
    """(prompts drawn, filtered) of each refill round of ``step``, from its log line."""
    return [(int(re.search(r"refill: (\d+) prompts", line).group(1)), not line.endswith("(unfiltered)"))
            for line in _refills(output, step)]


def check_protocol(output: str, steps: dict[int, dict], late: bool) -> None:
    """The calls the protocol spy recorded: a generation only with the replicas awake, a log-prob pass only
    with them asleep; each step in verl's order with its refill rounds (late placement: every round as
    verl's step, wake -> generate -> sleep -> log-prob); its extra wakes counted, and each one a weight sync
    the rollout server received with the weights that generated the step."""
    calls = [(c, int(s)) for c, s in SPY.findall(output)]
    assert calls, "the protocol spy recorded nothing"
    awake = False
    for c, s in calls:
        assert not (c == "generate" and not awake), f"step {s}: a generation with the replicas asleep"
        assert not (c == "log_prob" and awake), f"step {s}: a log-prob pass with the replicas awake"
        awake = {"wake": True, "sleep": False}.get(c, awake)
    syncs = parse_weight_syncs(output)
    for s, m in steps.items():
        # one entry per run of log-prob passes (a reference policy in the actor adds one after the step's)
        got = [c for i, (c, t) in enumerate(calls) if t == s and not (c == "log_prob" and calls[i - 1][0] == c)]
        rounds = len(_refills(output, s))
        if late:
            want = ["generate", "sleep", "log_prob"] + ["wake", "generate", "sleep", "log_prob"] * rounds
        else:
            want = ["generate", "sleep"] + (["wake"] + ["generate"] * rounds + ["sleep"] if rounds else []) + ["log_prob"]
        assert got == want + ["wake"], (s, got)  # the last wake: fit()'s sync after the update
        extra = got.count("wake") - 1
        assert m["devenus/sampling/extra_weight_syncs"] == extra
        step_syncs = [w["checksum"] for w in syncs if w["global_steps"] == s]
        assert len(step_syncs) == extra + 1, (s, step_syncs)
        before = [w["checksum"] for w in syncs if w["global_steps"] == s - 1][-1]  # the weights that generated s
        assert step_syncs[:-1] == [before] * extra, (s, before, step_syncs)


@pytest.mark.slow
def test_dynamic_sampling_refills_empty_slots_and_resumes_to_the_same_prompts(base_testbed, small_train, tmp_path):
    t0 = time.perf_counter()
    full = train(base_testbed, tmp_path / "full", _cfg(small_train), *KEYS, timeout=900)
    wall = time.perf_counter() - t0
    assert full.ok, full.tail(60)
    steps = train_steps(full)
    assert sorted(steps) == [1, 2, 3]
    for s, m in steps.items():
        assert m["devenus/sampling/groups_placeholder"] == 1  # the skipped prompt's slot ...
        assert m["devenus/sampling/slots_unfilled"] <= m["devenus/sampling/groups_zero_variance"]  # ... always filled
        # every response generated is counted: the step's 3 generated prompts, and per refill round its
        # drawn prompts (the filter skips the second of a filtered round's prompts)
        sizes = _round_sizes(full.output(), s)
        assert sum(f for _, f in sizes) == m["devenus/sampling/refill_rounds"]
        generated = N * (PROMPTS - 1 + sum(k - (f and k > 1) for k, f in sizes))
        assert m["devenus/rollouts/generated"] == m["devenus/sampling/rollouts_generated"] == generated
        # auto-sized rounds: the first draws the open slots over the step's informative share, within a batch
        zero = int(m["devenus/sampling/groups_zero_variance"])
        if sizes:
            assert sizes[0] == (refill_size(zero + 1, PROMPTS, PROMPTS - 1 - zero, PROMPTS), True)
        assert all(k <= PROMPTS for k, _ in sizes)
        if m["devenus/sampling/slots_unfilled"] == 0:  # every slot the step trains on is informative
            assert m["devenus/sampling/groups_kept"] + m["devenus/sampling/slots_filled_unfiltered"] == PROMPTS
    check_protocol(full.output(), steps, late=False)
    refilled = [m for m in steps.values() if m["devenus/sampling/groups_zero_variance"] > 0]
    assert refilled, "the testbed's base model should leave some all-wrong groups in 3 steps"
    assert all(m["devenus/sampling/refill_rounds"] > 0 for m in refilled)
    assert any(m["devenus/sampling/groups_kept"] > PROMPTS - 1 - m["devenus/sampling/groups_zero_variance"]
               for m in refilled), "refill should turn at least one empty slot into an informative group"
    print("\nsampling e2e: " + "; ".join(
        f"step {s}: zero-var {m['devenus/sampling/groups_zero_variance']:.0f}, rounds "
        f"{m['devenus/sampling/refill_rounds']:.0f}, kept {m['devenus/sampling/groups_kept']:.0f}, unfilled "
        f"{m['devenus/sampling/slots_unfilled']:.0f}, rollouts {m['devenus/rollouts/generated']:.0f}"
        for s, m in sorted(steps.items())) + f"; run {wall:.0f} s")

    # resume from step 2: the refill cursor is restored, so step 3 refills the same prompts first
    t1 = time.perf_counter()
    resumed = train(base_testbed, tmp_path / "resumed", _cfg(small_train), *KEYS, "trainer.resume_mode=resume_path",
                    f"trainer.resume_from_path={tmp_path / 'full' / 'checkpoints' / 'global_step_2'}", timeout=900)
    assert resumed.ok, resumed.tail(60)
    assert "restored the refill cursor" in resumed.output()
    assert sorted(train_steps(resumed)) == [3]
    check_protocol(resumed.output(), train_steps(resumed), late=False)
    a, b = _refills(full.output(), 3), _refills(resumed.output(), 3)
    assert a and b, (a, b)
    # the same prompts from the restored cursor; a round's size follows its step's own groups, so when the
    # resumed generation judged them otherwise, one round's prompts are the start of the other's
    ka, kb = (line.split(" prompts ")[1].split(" ")[0].split(",") for line in (a[0], b[0]))
    assert ka[:len(kb)] == kb[:len(ka)], (a, b)
    print(f"resume {time.perf_counter() - t1:.0f} s; step 3 refills: {a} vs {b}")


@pytest.mark.slow
@pytest.mark.extended  # the late placement (bash scripts/test.sh --all): GeoMin waits for the log-prob pass
def test_dynamic_sampling_with_a_late_placement_method(base_testbed, small_train, tmp_path):
    cfg = RunConfig(method="geomin", steps=2, prompts_per_step=PROMPTS, rollouts_per_prompt=N,
                    train_file=str(small_train.parent / "semi.parquet"), val_before_train=False,
                    extra_overrides=("trainer.test_freq=-1",))
    r = train(base_testbed, tmp_path, cfg, "+devenus.dynamic_sampling.enabled=true",
              "+devenus.method_config.min_per_class=2", "+devenus.method_config.min_mixture_points=2",
              "+devenus.method_config.top_layers=2", "devenus.plugins=[protocol_spy]", timeout=900)
    assert r.ok, r.tail(60)
    steps = train_steps(r)
    assert sorted(steps) == [1, 2]
    for s, m in steps.items():
        sizes = _round_sizes(r.output(), s)
        assert len(sizes) == m["devenus/sampling/refill_rounds"]
        assert m["devenus/rollouts/generated"] == N * (PROMPTS + sum(k for k, _ in sizes))
        assert m["devenus/geomin/layers_total"] == 5  # the late surfaces ran (on the composed batch)
    assert any(m["devenus/sampling/refill_rounds"] > 0 for m in steps.values())
    check_protocol(r.output(), steps, late=True)
    print("\nlate placement: " + "; ".join(
        f"step {s}: zero-var {m['devenus/sampling/groups_zero_variance']:.0f}, rounds "
        f"{m['devenus/sampling/refill_rounds']:.0f}, kept {m['devenus/sampling/groups_kept']:.0f}, extra weight syncs "
        f"{m['devenus/sampling/extra_weight_syncs']:.0f}" for s, m in sorted(steps.items())))
