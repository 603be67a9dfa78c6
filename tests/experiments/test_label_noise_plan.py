"""experiments/label_noise.py: the OLR reference's regimes are arms of the plan, paired with their own GRPO."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("label_noise", ROOT / "experiments" / "label_noise.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("label_noise", mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_reference_arms_at_rho_half_compare_olr_with_grpo_of_the_same_regime():
    ln = _module()
    arms = {a.name: a for a in ln.arms()}
    assert sorted(ln.reference_arms()) == ["grpo@redraw0.5", "grpo@sentinel0.5", "olr@redraw0.5", "olr@sentinel0.5"]
    for regime in ("sentinel", "redraw"):
        olr = arms[f"olr@{regime}0.5"]
        assert olr.method == "olr" and olr.baseline == f"grpo@{regime}0.5" and olr.claimed_side == 1
        assert ln.NOISE[olr.name] == (regime, 0.5)
    # the committed arms are all still there, named as their results are
    committed = {p.stem.rsplit("_s", 1)[0] for p in (ROOT / "experiments/results/label_noise").glob("*_s[0-9].json")}
    assert committed <= set(arms) | {"base"}
