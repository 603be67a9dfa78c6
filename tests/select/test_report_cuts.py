"""The calibration picture marks the ratio selector's cut points where its counts put them."""

from devenus.select.report import rank_cuts


def test_ratio_cuts_from_the_counts():
    r = {"selector": "ratio", "signal": "consistency", "counts": {"discard": 216, "weak": 146, "annotate": 150, "keep": 0}}
    cuts = rank_cuts(r, "consistency", 512)
    assert [x for x, _, _ in cuts] == [216.0, 362.0]
    assert rank_cuts(r, "entropy", 512) == []  # another signal's curve: its ranks are not the routed ones
    assert rank_cuts({**r, "selector": "triage"}, "consistency", 512) == []  # triage marks thresholds


def test_a_budget_overflow_goes_weak_so_the_annotate_cut_moves_up():
    # rho_annotate 0.293 of 512 = 150 at the top; a budget of 100 sends the 50 least uncertain of them to weak
    r = {"selector": "ratio", "signal": "u", "counts": {"discard": 216, "weak": 196, "annotate": 100, "keep": 0}}
    assert [x for x, _, _ in rank_cuts(r, "u", 512)] == [216.0, 412.0]
