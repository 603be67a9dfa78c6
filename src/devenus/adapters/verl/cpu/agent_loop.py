"""An agent-loop manager whose workers build each agent loop once, not once per sample.

verl 0.9.1's ``AgentLoopWorker._run_agent_loop`` builds a new agent-loop object for every sample
with ``hydra.utils.instantiate`` (config merge, target checks, a Continuous Token builder): 7.8 ms of
CPU per sample measured here (the testbed's single-turn loop, at load ~10), i.e. ~1 s per training
step of 128 samples and ~16 s per validation of 2,048, on the critical path of generation: the server
waits for the batch's last request.

:class:`ReusingAgentLoopManager` is verl's own seam for this
(``actor_rollout_ref.rollout.agent.agent_loop_manager_class``): its workers keep one object per agent
name for loop classes whose ``run`` keeps no state on the object (``SingleTurnAgentLoop`` and its
subclasses that define no ``__init__``, such as DE-Venus's vote loop); any other loop is built per
sample, as verl does.
"""

from __future__ import annotations

from typing import Any

import ray
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopManager,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.utils.rollout_trace import rollout_trace_attr

MANAGER_FQN = "devenus.adapters.verl.cpu.agent_loop.ReusingAgentLoopManager"


def reusable(cls: type) -> bool:
    """A loop class whose objects can serve sample after sample: the single-turn loop, or a subclass
    of it that adds no constructor (so no per-object state beyond what verl's constructor sets)."""
    if not (isinstance(cls, type) and issubclass(cls, SingleTurnAgentLoop)):
        return False
    return all("__init__" not in vars(c) for c in cls.__mro__[: cls.__mro__.index(SingleTurnAgentLoop)])


def _target_class(agent_loop_config: Any) -> type | None:
    from hydra.utils import get_class

    target = agent_loop_config.get("_target_") if hasattr(agent_loop_config, "get") else None
    try:
        return get_class(target) if target else None
    except Exception:
        return None


class ReusingAgentLoopWorker(AgentLoopWorker):
    _loops: dict[str, Any]

    async def _run_agent_loop(self, sampling_params: dict[str, Any], trajectory: dict[str, Any], *,
                              agent_name: str, trace: bool = True, **kwargs):
        loops = self.__dict__.setdefault("_loops", {})
        agent_loop = loops.get(agent_name)
        if agent_loop is None:
            config = _agent_loop_registry.get(agent_name)
            if config is None or not reusable(_target_class(config)):  # verl's own path, one object per sample
                return await super()._run_agent_loop(sampling_params, trajectory, agent_name=agent_name,
                                                     trace=trace, **kwargs)
            agent_loop = loops[agent_name] = self._build(config)
        # what verl's _run_agent_loop does around the object (the trace attributes, run, post-process)
        with rollout_trace_attr(step=trajectory["step"], sample_index=trajectory["sample_index"],
                                rollout_n=trajectory["rollout_n"], validate=trajectory["validate"],
                                name="agent_loop", trace=trace):
            output = await agent_loop.run(sampling_params, **kwargs)
            return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)

    def _build(self, config: Any) -> Any:
        import hydra

        # the same construction verl makes for every sample, made once
        return hydra.utils.instantiate(
            config=config,
            trainer_config=DictConfigWrap(config=self.config),
            server_manager=self.llm_client,
            tokenizer=self.tokenizer,
            processor=self.processor,
            hf_model_type=self.hf_model_type,
            dataset_cls=self.dataset_cls,
            data_config=DictConfigWrap(self.config.data),
            tools=ToolListWrap(self.tools),
        )


class ReusingAgentLoopManager(AgentLoopManager):
    """verl's ``AgentLoopManager`` with :class:`ReusingAgentLoopWorker` workers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.agent_loop_workers_class = ray.remote(ReusingAgentLoopWorker)
        super().__init__(*args, **kwargs)
