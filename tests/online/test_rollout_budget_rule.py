"""The rollout budget's stop rule and its config (verl-free): stop at the first validation step at or after
the run's rollouts reach the budget; 0 is off; a budget needs periodic validation."""

import pytest

from devenus.config import ConfigError, config_from_dict
from devenus.online.budget import RolloutBudgetConfig, budget_stop, check_budget


def first_stop(per_step, budget, test_freq, cap=100):
    """The step a run with ``per_step`` rollouts a step stops at under the rule (None: it runs to the cap)."""
    total = 0
    for step in range(1, cap + 1):
        total += per_step(step) if callable(per_step) else per_step
        if budget_stop(step, total, budget, test_freq):
            return step
    return None


def test_not_reached_never_stops():
    assert not budget_stop(4, 4095, 4096, 4)
    assert first_stop(128, 4096, 4, cap=31) is None  # 31 x 128 = 3968 < 4096: the cap ends the run


def test_reached_mid_interval_stops_at_the_next_validation_step():
    assert not budget_stop(5, 5000, 4096, 4)  # reached at step 5, not a validation step
    assert budget_stop(8, 5100, 4096, 4)
    assert first_stop(1000, 4096, 4) == 8  # 4,000 after step 4, 5,000 after step 5: validated at 8
    assert first_stop(lambda s: 200 if s <= 20 else 1000, 4096, 4) == 24  # 4,000 at 20, 5,000 at 21


def test_reached_exactly_at_a_validation_step_stops_there():
    assert budget_stop(32, 4096, 4096, 4)
    assert first_stop(128, 4096, 4) == 32  # plain GRPO: 32 steps of 16 x 8
    assert first_stop(128, 4096, 1) == 32


def test_off_never_stops_whatever_the_count():
    assert not budget_stop(4, 10**9, 0, 4)
    assert first_stop(10**6, 0, 1) is None


def test_without_periodic_validation_the_rule_never_stops_and_the_setup_is_refused():
    assert not budget_stop(4, 10**6, 4096, 0) and not budget_stop(4, 10**6, 4096, -1)
    assert "trainer.test_freq > 0" in check_budget(4096, -1) and "devenus.budget.rollouts=4096" in check_budget(4096, 0)
    assert check_budget(4096, 4) is None and check_budget(0, -1) is None


def test_the_option_is_an_integer_from_0_with_its_override():
    assert RolloutBudgetConfig().rollouts == 0
    assert config_from_dict(RolloutBudgetConfig, {"rollouts": 4096}).rollouts == 4096
    for bad in (-1, 10**12 + 1, 1.5, "many"):
        with pytest.raises(ConfigError, match=r"devenus\.budget\.rollouts"):
            config_from_dict(RolloutBudgetConfig, {"rollouts": bad})
    assert RolloutBudgetConfig.override("rollouts", "4096") == "+devenus.budget.rollouts=4096"


def test_the_overlay_reads_the_budget_section():
    from devenus.adapters.verl.overlay import DevenusConfig

    assert config_from_dict(DevenusConfig, {"budget": {"rollouts": 64}}).budget.rollouts == 64
    with pytest.raises(ConfigError, match=r"devenus\.budget\.rolouts"):
        config_from_dict(DevenusConfig, {"budget": {"rolouts": 64}})
