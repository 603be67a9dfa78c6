"""Vote on N, train on M: generation-only rollouts in verl's rollout call (see ``OnlineMethod.extra_rollouts``).

verl hands the rollout manager the prompts already repeated M = ``rollout.n`` times (groups contiguous,
one ``uid`` per prompt). :func:`expand_for_votes` rebuilds the batch with N rows per prompt (the M
training rows first, then the N - M vote rows of each group), so one ``generate_sequences`` call
produces all N; after the vote, one aligned selection (:func:`devenus.adapters.verl.surfaces.select_rows`)
keeps the M training rows, in the order verl expects, before any log-prob pass.

Vote rows at another temperature go through DE-Venus's ``TemperatureAgentLoop`` (per-row
``agent_name`` + ``devenus_temperature`` columns): verl's agent loop takes the temperature from the
rollout config for the whole batch and offers no per-request override.
"""

from __future__ import annotations

import importlib.resources
import os
from typing import Sequence

import numpy as np
from verl import DataProto

TEMPERATURE_KEY = "devenus_temperature"
AGENT_KEY = "agent_name"
VOTE_AGENT = "devenus_vote_temperature"
ADDED_KEYS = (TEMPERATURE_KEY,)


def agent_loops_yaml() -> str:
    return str(importlib.resources.files("devenus.configs") / "agent_loops.yaml")


def check_group_layout(prompts: DataProto, n: int) -> int:
    """Number of prompts; raises ValueError unless rows come in contiguous groups of ``n`` sharing a uid."""
    uid = np.asarray(prompts.non_tensor_batch["uid"], dtype=object)
    if len(uid) % n:
        raise ValueError(f"vote-on-N expects {n} rollouts per prompt, got {len(uid)} rows")
    groups = uid.reshape(-1, n)
    if not (groups == groups[:, :1]).all() or len(set(groups[:, 0])) != len(groups):
        raise ValueError(f"vote-on-N expects contiguous groups of rollout.n={n} rows sharing a uid "
                         "(verl's interleaved repeat; REMAX baselines are not supported)")
    return len(groups)


def expand_for_votes(prompts: DataProto, n: int, extra: Sequence[float | None],
                     default_agent: str = "single_turn_agent") -> tuple[DataProto, np.ndarray]:
    """(prompts with N = n + len(extra) rows per group, train mask). Row g*N + j trains iff j < n.

    Vote rows with a temperature get ``agent_name=devenus_vote_temperature`` and ``devenus_temperature``;
    the training rows keep the default agent loop, so they are generated exactly as verl would.
    """
    b = check_group_layout(prompts, n)
    total = n + len(extra)
    big = prompts.select_idxs(np.arange(b) * n).repeat(repeat_times=total, interleave=True)
    j = np.tile(np.arange(total), b)
    train = j < n
    temps = [None] * n + list(extra)
    if any(t is not None for t in extra):
        if AGENT_KEY in prompts.non_tensor_batch and set(prompts.non_tensor_batch[AGENT_KEY]) != {default_agent}:
            raise ValueError("vote_temperatures needs the single-turn agent loop "
                             f"({default_agent}); this batch uses {sorted(set(prompts.non_tensor_batch[AGENT_KEY]))}")
        big.non_tensor_batch[AGENT_KEY] = np.array(
            [default_agent if temps[k] is None else VOTE_AGENT for k in j], dtype=object)
        big.non_tensor_batch[TEMPERATURE_KEY] = np.array(
            [np.nan if temps[k] is None else float(temps[k]) for k in j], dtype=np.float64)
    return big, train


def drop_added_columns(data: DataProto, had_agent: bool) -> None:
    """Remove the columns :func:`expand_for_votes` added (in case verl copied inputs into the outputs)."""
    for k in ADDED_KEYS + (() if had_agent else (AGENT_KEY,)):
        data.non_tensor_batch.pop(k, None)


def install_vote_agent_loop(config) -> None:
    """Point ``rollout.agent.agent_loop_config_path`` at DE-Venus's agent loops (before workers start)."""
    from omegaconf import OmegaConf, open_dict

    agent = config.actor_rollout_ref.rollout.agent
    current = agent.get("agent_loop_config_path", None)
    ours = agent_loops_yaml()
    if current and os.path.abspath(current) != ours:
        from verl.utils.import_utils import resolve_config_path

        names = [e.get("name") for e in OmegaConf.load(resolve_config_path(current))]
        if VOTE_AGENT not in names:
            raise ValueError(f"votes at other temperatures need the agent loop {VOTE_AGENT!r}: add the entry of {ours} "
                             f"to actor_rollout_ref.rollout.agent.agent_loop_config_path={current}")
        return
    with open_dict(config):
        agent.agent_loop_config_path = ours
