"""refine_mechanism's verdicts on hand-built records whose answers are known: each rule's interval (the
variance inflated for 6 visits a question, checked against scipy's Wilson interval at the effective n),
each verdict reachable, and the definition's arms and files as its plan states them."""

import math

import pytest
from scipy.stats import binomtest

from devenus.experiments.definition import EXPERIMENTS
from devenus.experiments.definitions import refine_mechanism as rm
from devenus.experiments.stats import proportion_difference, wilson_interval


def _m(**ratios):
    return {f"devenus/mechanism/{k.replace('__', '/')}": {"num": n, "den": d, "value": n / d if d else float("nan")}
            for k, (n, d) in ratios.items()}


def _rows(text):
    return {r.split(" | ")[0].lstrip("| "): r for r in text.splitlines() if r.startswith("| ") and "@" in r.split(" | ")[0]}


def test_the_clustered_wilson_interval_is_scipys_at_the_effective_n():
    lo, hi = wilson_interval(60, 120, design_effect=rm.VISITS)  # 10 / 20 effective
    ci = binomtest(10, 20).proportion_ci(method="wilson")
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_a_difference_allows_for_the_visits_per_question():
    d, lo, hi = proportion_difference(1920, 2400, 1680, 2400, design_effect=rm.VISITS)  # 0.8 vs 0.7
    half = 1.959963984540054 * math.sqrt(6 * (0.8 * 0.2 / 2400 + 0.7 * 0.3 / 2400))
    assert (d, lo, hi) == pytest.approx((0.1, 0.1 - half, 0.1 + half))
    # 0.1 +- 0.060 with the inflation (+- 0.024 without it)
    assert lo > 0 and half == pytest.approx(0.0596, abs=1e-3)
    assert proportion_difference(480, 600, 420, 600, design_effect=rm.VISITS)[1] < 0  # a quarter of the groups: no longer excludes 0


def test_every_verdict_on_known_counts():
    recs = {
        ("base", 0): {"mechanism": {}},
        ("ttrl@0", 0): {"mechanism": _m(pseudo_target__precision=(7000, 10000), pseudo_target__coverage=(10000, 15000))},
        # semi: 0.70 vs 0.70 on 6,000 groups each: inside ±0.05 even with the inflation
        ("semi@40", 0): {"mechanism": _m(pseudo_target__precision=(4200, 6000), pseudo_target__coverage=(6000, 9000))},
        # trapo: admitted 0.9 of 600, rejected 0.5 of 600: separates
        ("trapo@40", 0): {"mechanism": _m(admission__admitted_precision=(540, 600), admission__rejected_precision=(300, 600))},
        # trapo2: 12 proposals: far too few to tell from ttrl's 0.70
        ("trapo2@40", 0): {"mechanism": _m(promotion__precision=(10, 12), promotion__recall=(10, 900))},
        # nl_olr2: 290 of 300 right: above 0.5 at the effective n of 50
        ("nl_olr2@active0.9", 0): {"mechanism": _m(proposed_correction__precision=(290, 300),
                                                    proposed_correction__recall=(290, 3000))},
    }
    text = rm.report_text(recs, {"num": 50, "den": 52, "value": 50 / 52})
    rows = _rows(text)
    assert set(rows) == {"ttrl@0", "semi@40", "trapo@40", "trapo2@40", "nl_olr2@active0.9"}
    assert rows["ttrl@0"].endswith("| the reference |")
    assert rows["semi@40"].endswith("| level within the margin |")
    assert rows["trapo@40"].endswith("| admits the better pseudo labels |")
    assert rows["trapo2@40"].endswith("| inconclusive |")
    assert rows["nl_olr2@active0.9"].endswith("| corrections mostly right |")
    assert "OLR (applied, other code) 0.962 (50/52)" in rows["nl_olr2@active0.9"]
    # the other sides
    worse = rm.report_text({("trapo@40", 0): {"mechanism": _m(admission__admitted_precision=(300, 600),
                                                               admission__rejected_precision=(540, 600))}})
    assert _rows(worse)["trapo@40"].endswith("| admits the worse |")
    wrong = rm.report_text({("nl_olr2@active0.9", 0): {"mechanism": _m(proposed_correction__precision=(30, 600),
                                                                         proposed_correction__recall=(0, 10))}})
    assert _rows(wrong)["nl_olr2@active0.9"].endswith("| mostly wrong |")
    none = rm.report_text({("nl_olr2@active0.9", 0): {"mechanism": {}}})
    assert _rows(none)["nl_olr2@active0.9"].endswith("| no proposals |")


def test_the_definition_is_the_plans():
    d = EXPERIMENTS.get("refine_mechanism")
    arms = {a.name: a for a in d.arms}
    assert sorted(arms) == ["nl_olr2@active0.9", "semi@40", "trapo2@40", "trapo@40", "ttrl@0"]
    assert arms["trapo@40"].method_config == {"warmup": 2} and arms["trapo@40"].labeled_fraction == 0.4
    assert arms["semi@40"].method == arms["ttrl@0"].method == "ttrl" and arms["ttrl@0"].labeled_fraction == 0.0
    assert d.budget == EXPERIMENTS.get("label_noise_rho").budget and d.seeds == (0,)
    steps, prompts = d.budget.steps, d.budget.prompts_per_step
    assert steps * prompts // rm.POOL == rm.VISITS == 6
    assert round(rm.POOL * rm.LABELED) == 51
