"""The agent-loop manager that builds each agent loop once per worker changes nothing but the time."""

import pytest

pytest.importorskip("verl")

pytestmark = pytest.mark.verl


def test_which_loops_are_reused():
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    from devenus.adapters.verl.cpu.agent_loop import reusable
    from devenus.adapters.verl.vote_agent_loop import TemperatureAgentLoop

    class WithState(SingleTurnAgentLoop):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.turns = []

    class Child(WithState):
        pass

    assert reusable(SingleTurnAgentLoop) and reusable(TemperatureAgentLoop)
    assert not reusable(ToolAgentLoop) and not reusable(WithState) and not reusable(Child)
    assert not reusable(None) and not reusable(object)


def test_the_cpu_backend_uses_it():
    from devenus.adapters.verl.cpu.agent_loop import MANAGER_FQN
    from devenus.adapters.verl.cpu.launch import cpu_overrides

    assert f"++actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER_FQN}" in cpu_overrides()
    # that it changes nothing but the time: test_seeded_runs.py runs one config with it and with verl's own
    # manager and compares every step metric and validation sample
