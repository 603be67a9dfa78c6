import copy

import pytest

from devenus.testbed import tasks
from devenus.testbed.build import question_rows
from devenus.testbed.noise import inject_noise


@pytest.fixture
def rows():
    return question_rows(tasks.generate("add", (2, 3), 100, seed=3), "train")


def _noisy(out):
    return [r for r in out if r["simulation"]["noise"] != "none"]


def test_inactive_noise_ratio_targets_and_truth_kept(rows):
    before = copy.deepcopy(rows)
    out = inject_noise(rows, 0.3, "inactive", seed=0)
    assert rows == before  # input untouched
    noisy = _noisy(out)
    assert len(noisy) == 30
    for r in noisy:
        gt, truth = r["reward_model"]["ground_truth"], r["simulation"]["hidden_answer"]
        assert gt != truth and gt.startswith("-") and gt[1:].isdigit()
        # from a method's view nothing marks the row as noisy
        assert r["extra_info"]["labeled"] is True and r["extra_info"]["label_source"] == "gold"
    clean = [r for r in out if r["simulation"]["noise"] == "none"]
    assert all(r["reward_model"]["ground_truth"] == r["simulation"]["hidden_answer"] for r in clean)
    assert inject_noise(rows, 0.3, "inactive", seed=0) == out  # deterministic
    assert inject_noise(rows, 0.3, "inactive", seed=1) != out


def test_active_noise_uses_observed_wrong_answers(rows):
    keys = [r["extra_info"]["index"] for r in rows]
    wrong = {k: (["111", "222", "111"] if i % 2 == 0 else []) for i, k in enumerate(keys)}
    out = inject_noise(rows, 0.5, "active", seed=0, wrong_answers=wrong)
    noisy = _noisy(out)
    assert len(noisy) == 50
    assert {r["reward_model"]["ground_truth"] for r in noisy} == {"111"}  # the most frequent wrong answer
    assert all(wrong[r["extra_info"]["index"]] for r in noisy)  # only questions with an observed error
    with pytest.raises(ValueError, match="observed wrong answer"):
        inject_noise(rows, 0.6, "active", seed=0, wrong_answers=wrong)


def test_noise_errors(rows):
    with pytest.raises(ValueError, match="rho"):
        inject_noise(rows, 1.5, "inactive", seed=0)
    with pytest.raises(ValueError, match="regime"):
        inject_noise(rows, 0.1, "loud", seed=0)
    with pytest.raises(ValueError, match="wrong_answers"):
        inject_noise(rows, 0.1, "active", seed=0)


@pytest.mark.slow
def test_wrong_answer_sampling_is_deterministic_across_chunks(base_testbed):
    """Sampling runs in chunks (for the progress bar); the result still depends on (seed, rows) only."""
    from devenus.records import read_records
    from devenus.testbed.noise import SAMPLE_CHUNK, sample_wrong_answers

    model, tok = base_testbed.load_model()
    rows = read_records(base_testbed.split("train"))[: SAMPLE_CHUNK + 20]  # two chunks
    a = sample_wrong_answers(model, tok, rows, n_samples=2, seed=3, progress=False)
    b = sample_wrong_answers(model, tok, rows, n_samples=2, seed=3, progress=False)
    assert a == b and list(a) == [r["extra_info"]["index"] for r in rows]
    assert any(a.values())


def test_reference_regimes_write_the_unmatchable_sentinel(rows, tmp_path):
    from devenus.records import read_records, validate_rows, write_records
    from devenus.verify import UNMATCHABLE, grade

    for regime in ("sentinel", "redraw"):
        out = inject_noise(rows, 0.5, regime, seed=4)
        noisy = _noisy(out)
        assert len(noisy) == 50 and {r["reward_model"]["ground_truth"] for r in noisy} == {UNMATCHABLE}
        assert all(r["simulation"]["noise"] == regime for r in noisy)
        assert all(("noise_seed" in r["simulation"]) == (regime == "redraw") for r in noisy)
        assert all(r["extra_info"]["labeled"] and r["simulation"]["hidden_answer"] for r in noisy)
        validate_rows(out)  # the record contract accepts the sentinel and both kinds
        write_records(out, tmp_path / f"{regime}.parquet")
        back = read_records(tmp_path / f"{regime}.parquet")
        assert [r["simulation"].get("noise_seed") for r in back] == [r["simulation"].get("noise_seed") for r in out]
    # the same rows as the offline regimes of the same seed would pick: arms of one seed stay paired
    assert [r["simulation"]["noise"] != "none" for r in inject_noise(rows, 0.5, "sentinel", seed=4)] == \
        [r["simulation"]["noise"] != "none" for r in inject_noise(rows, 0.5, "redraw", seed=4)]
    # the verifier never matches the sentinel, not even a response that writes it
    assert grade("\\boxed{__NoCorrectAnswer__}", UNMATCHABLE).score == 0.0
    assert grade("\\boxed{3}", UNMATCHABLE).score == 0.0


def test_cli_regimes_match_and_a_bad_regime_is_a_one_line_error(capsys):
    from devenus import cli
    from devenus.testbed.noise import REGIMES

    assert cli.NOISE_REGIMES == REGIMES
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["testbed", "noise", "--rho", "0.5", "--regime", "loud"])
    assert e.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("devenus")]
    assert len(err) == 1 and "--regime: invalid choice: 'loud'" in err[0] and "redraw" in err[0]
