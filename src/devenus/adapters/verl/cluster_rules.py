"""Rules verl enforces only after Ray starts (in its workers or the trainer's batch balancing), decided here
from the composed config at the cluster's shape, so a dry run on a laptop fails the way 8 GPUs would.

verl 0.9.1 skips its own batch-size checks when ``actor.use_dynamic_bsz`` is True (``verl/utils/config.py``
``validate_config``), but the rows are still split across data-parallel ranks at run time:
``RayPPOTrainer._balance_batch`` partitions ``train_batch_size * rollout.n`` rows into ``dp`` equal parts,
``TrainingWorker.train_mini_batch`` asserts ``mini_batch_size % dp == 0`` (``engine_workers.py``), and the
actor-rollout worker asserts ``actor.use_dynamic_bsz == rollout.log_prob_use_dynamic_bsz``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings

#: verl's optional engines, each announced with a UserWarning when its package is absent
#: (``verl/workers/engine/__init__.py``); DE-Venus runs verl's FSDP engine, so their absence is expected
OPTIONAL_ENGINES = ("torchtitan", "veomni", "automodel", "mindspeed", "megatron")

#: DE-Venus's verl plugin module (``plugin.py``; its own name, not imported here: importing it loads verl)
PLUGIN = "devenus.adapters.verl.plugin"

#: where verl reads the attention implementation (``verl/workers/config/model.py``: default flash_attention_2)
ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"


def choose_attention(argv: list[str]) -> tuple[list[str], str]:
    """``argv`` with the attention implementation verl will load the actor with, and the one line saying it.
    verl defaults to ``flash_attention_2``, which fails to load where flash-attn is not installed; a user's
    (or the CPU backend's) choice on the command line wins."""
    given = [a for a in argv if a.lstrip("+").startswith(ATTN_KEY + "=")]
    if given:
        return list(argv), f"devenus: attention: {given[-1].split('=', 1)[1]} (from the command line)"
    impl = "flash_attention_2" if importlib.util.find_spec("flash_attn") is not None else "sdpa"
    why = "flash_attn is importable" if impl == "flash_attention_2" else "flash_attn is not installed"
    return [*argv, f"+{ATTN_KEY}={impl}"], f"devenus: attention: {impl} ({why})"


def import_verl_quietly() -> None:
    """Import verl (and its plugins) without the wall of "<engine> engine is not available" warnings for
    the optional engines DE-Venus never uses. Any other warning, and any failure, still shows."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning,
                                message=rf"({'|'.join(OPTIONAL_ENGINES)}) engine is not available: ")
        import verl.workers.engine  # noqa: F401


def plugin_problem() -> str | None:
    """Why DE-Venus's verl plugin is not loaded in this process (None: it is). ``import verl`` loads every
    ``verl.plugins`` entry point but logs a failure at debug level only (``verl/__init__.py``), so a broken
    or skipped plugin would surface much later as a missing engine extension inside a Ray worker."""
    import_verl_quietly()  # runs verl's plugin discovery

    if PLUGIN in sys.modules:
        return None
    policy = os.getenv("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower()
    if policy == "none" or (policy != "auto" and "devenus" not in {p.strip() for p in policy.split(",")}):
        if PLUGIN not in os.getenv("VERL_USE_EXTERNAL_MODULES", "").split(","):
            return (f"VERL_USE_EXTERNAL_PLUGINS={policy} skips devenus's verl plugin: add devenus to it, or "
                    f"set VERL_USE_EXTERNAL_MODULES={PLUGIN}")
    try:  # the import verl attempted, again, to say why it failed
        importlib.import_module(PLUGIN)
    except Exception as e:
        return f"devenus's verl plugin {PLUGIN} failed to import: {type(e).__name__}: {e}"
    return (f"devenus's verl plugin was not loaded by `import verl` (no verl.plugins entry point named devenus: "
            f"reinstall devenus with `pip install -e .`, or set VERL_USE_EXTERNAL_MODULES={PLUGIN})")


def _get(config, dotted: str, default=None):
    node = config
    for part in dotted.split("."):
        if node is None or part not in node:
            return default
        node = node[part]
    return node


def cluster_errors(config, use_reference_policy: bool) -> list[str]:
    """One line per rule the composed config breaks at its cluster shape (``trainer.n_gpus_per_node *
    trainer.nnodes`` GPUs, FSDP data-parallel size = GPUs / Ulysses sequence-parallel size)."""
    arr = config.actor_rollout_ref
    n_gpus = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes)
    shape = f"{config.trainer.nnodes} node(s) x {config.trainer.n_gpus_per_node} GPUs"
    errors: list[str] = []
    sp = int(_get(arr, "actor.ulysses_sequence_parallel_size", 1) or 1)
    if n_gpus % sp:
        errors.append(f"actor_rollout_ref.actor.ulysses_sequence_parallel_size={sp} does not divide the {n_gpus} "
                      f"GPUs of {shape}")
        return errors
    tp = int(_get(arr, "rollout.tensor_model_parallel_size", 1) or 1)
    if n_gpus % tp:
        errors.append(f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp} does not divide the {n_gpus} "
                      f"GPUs of {shape}")
    dp = n_gpus // sp
    n = int(arr.rollout.n)
    rows = int(config.data.train_batch_size) * n
    if rows % dp:
        errors.append(f"data.train_batch_size * actor_rollout_ref.rollout.n = {config.data.train_batch_size} * {n} "
                      f"= {rows} rows do not divide into the {dp} data-parallel ranks of {shape} (verl balances "
                      f"a step's rows into {dp} equal parts)")
    mini = int(arr.actor.ppo_mini_batch_size) * n
    if mini % dp:
        errors.append(f"actor_rollout_ref.actor.ppo_mini_batch_size * rollout.n = {arr.actor.ppo_mini_batch_size} "
                      f"* {n} = {mini} rows do not divide into the {dp} data-parallel ranks of {shape}")
    actor_dyn = bool(arr.actor.use_dynamic_bsz)
    if actor_dyn != bool(arr.rollout.log_prob_use_dynamic_bsz):
        errors.append(f"actor_rollout_ref.actor.use_dynamic_bsz={actor_dyn} but "
                      f"actor_rollout_ref.rollout.log_prob_use_dynamic_bsz={bool(arr.rollout.log_prob_use_dynamic_bsz)}: "
                      "verl's actor worker requires them equal")
    # without dynamic batching each pass needs a per-GPU micro-batch size that splits its rows
    if not actor_dyn:
        micro = _get(arr, "actor.ppo_micro_batch_size_per_gpu")
        if micro is None:
            errors.append("actor_rollout_ref.actor.use_dynamic_bsz=False needs "
                          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
        elif mini % dp == 0 and (mini // dp) % int(micro):
            errors.append(f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro} does not divide the "
                          f"{mini // dp} mini-batch rows per GPU at {shape}")
    if not bool(arr.rollout.log_prob_use_dynamic_bsz) and _get(arr, "rollout.log_prob_micro_batch_size_per_gpu") is None:
        errors.append("actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False needs "
                      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu")
    if use_reference_policy and not bool(_get(arr, "ref.log_prob_use_dynamic_bsz", False)) \
            and _get(arr, "ref.log_prob_micro_batch_size_per_gpu") is None:
        errors.append("actor_rollout_ref.ref.log_prob_use_dynamic_bsz=False needs "
                      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu")
    return errors
