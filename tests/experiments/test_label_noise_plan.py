"""The label-noise experiment: the OLR reference's regimes are arms of the plan, paired with their own GRPO."""

from pathlib import Path

from devenus.experiments.definitions import label_noise as ln

ROOT = Path(__file__).resolve().parents[2]


def test_reference_arms_at_rho_half_compare_olr_with_grpo_of_the_same_regime():
    arms = {a.name: a for a in ln.ARMS}
    assert sorted(ln.GROUPS["reference"]) == ["grpo@redraw0.5", "grpo@sentinel0.5", "olr@redraw0.5", "olr@sentinel0.5"]
    for regime in ("sentinel", "redraw"):
        olr = arms[f"olr@{regime}0.5"]
        assert olr.method == "olr" and olr.baseline == f"grpo@{regime}0.5" and olr.claimed_side == 1
        assert ln.NOISE[olr.name] == (regime, 0.5)
    # the committed arms are all still there, named as their results are
    committed = {p.stem.rsplit("_s", 1)[0] for p in (ROOT / "experiments/results/label_noise").glob("*_s[0-9].json")}
    assert committed <= set(arms) | {"base"}


def test_quick_mode_runs_rho_half_in_both_regimes_and_the_reference_group_with_full():
    quick = ln.DEFINITION.arm_names(None, quick=True)
    assert quick == ["grpo@inactive0.5", "olr@inactive0.5", "nl_olr2@inactive0.5", "nl_olr2_d1@inactive0.5",
                     "grpo@active0.5", "olr@active0.5", "nl_olr2@active0.5", "nl_olr2_d1@active0.5"]
    assert ln.DEFINITION.arm_names("reference,grpo_clean", quick=False) == [*ln.GROUPS["reference"], "grpo_clean"]
    assert ln.DEFINITION.arm_names(None, quick=False) is None  # every arm
