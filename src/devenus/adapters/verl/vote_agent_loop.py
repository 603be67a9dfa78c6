"""verl agent loop for vote rollouts at another temperature (TTRL's ensemble voting).

verl 0.9.1's agent loop takes the sampling temperature from the rollout config for a whole batch
(``meta_info`` only switches to the validation settings), but it hands every non-tensor column of a
row to the row's agent loop (picked by the ``agent_name`` column). This single-turn loop reads the
row's ``devenus_temperature`` and samples at it; everything else is verl's ``SingleTurnAgentLoop``.
It is registered in the agent-loop workers through ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
(``devenus/configs/agent_loops.yaml``), which DeVenusTrainer sets when a method asks for such votes.
"""

from __future__ import annotations

import math
from typing import Any

from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from devenus.adapters.verl.votes import TEMPERATURE_KEY


_announced: set[float] = set()


class TemperatureAgentLoop(SingleTurnAgentLoop):
    async def run(self, sampling_params: dict[str, Any], **kwargs):
        t = kwargs.pop(TEMPERATURE_KEY, None)
        if t is not None and not math.isnan(float(t)):
            t = float(t)
            sampling_params = {**sampling_params, "temperature": t}
            if t == 0.0:  # greedy
                sampling_params.update(top_p=1.0, top_k=-1)
            if t not in _announced:  # once per worker process and temperature: visible in the driver's log
                _announced.add(t)
                print(f"[devenus] vote rollouts sampled at temperature {t}", flush=True)
        return await super().run(sampling_params, **kwargs)
