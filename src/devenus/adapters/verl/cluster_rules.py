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
import subprocess
import sys
import warnings

from devenus.config.overrides import OverrideError, hydra_value, parse_override_line, parse_overrides

#: verl's optional engines, each announced with a UserWarning when its package is absent
#: (``verl/workers/engine/__init__.py``); DE-Venus runs verl's FSDP engine, so their absence is expected
OPTIONAL_ENGINES = ("torchtitan", "veomni", "automodel", "mindspeed", "megatron")

#: DE-Venus's verl plugin module (``plugin.py``; its own name, not imported here: importing it loads verl)
PLUGIN = "devenus.adapters.verl.plugin"

#: where verl reads the attention implementation (``verl/workers/config/model.py``: default flash_attention_2)
ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"


#: the import a worker's model load runs first with flash_attention_2: flash-attn's compiled extension, which a
#: wheel built for another torch or CUDA fails (undefined symbol, an ImportError or OSError) or crashes on
_FLASH_PROBE = "import flash_attn, flash_attn.flash_attn_interface"


def flash_attn_problem(timeout_s: float = 300) -> str | None:
    """Why flash-attn cannot serve as the attention kernel here (None: it imports). The import runs in a fresh
    interpreter, so a binary that crashes, or loads CUDA libraries, does so there and not in the launcher;
    ``find_spec`` alone would pass a wheel built for another torch, which then fails in every worker."""
    if importlib.util.find_spec("flash_attn") is None:
        return "flash_attn is not installed"
    try:
        r = subprocess.run([sys.executable, "-c", _FLASH_PROBE], capture_output=True, text=True, timeout=timeout_s,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"flash_attn is installed but its import did not finish in {timeout_s:g} s"
    if r.returncode == 0:
        return None
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    what = lines[-1] if lines else f"the interpreter exited with {r.returncode}"
    return f"flash_attn is installed but fails to import ({what[:300]}): built for another torch or CUDA?"


def choose_attention(argv: list[str]) -> tuple[list[str], str]:
    """``argv`` with the attention implementation verl will load the actor with, and why (for
    :func:`attention_line`). verl defaults to ``flash_attention_2``, which fails to load where flash-attn does
    not import; a user's (or the CPU backend's) choice on the command line wins. The choice is made here, on
    the launch host, and written into the config, so every worker loads the same one without deciding again."""
    if any(o.key == ATTN_KEY and not o.delete for o in parse_overrides(argv)):
        return list(argv), "from the command line"
    problem = flash_attn_problem()
    impl = "flash_attention_2" if problem is None else "sdpa"
    return [*argv, f"+{ATTN_KEY}={impl}"], problem or "flash_attn imports"


def packed_tokens(config) -> int:
    """The most tokens one micro-batch of the actor's passes (update, old and reference log-probs) holds:
    verl's per-GPU token budgets (times the Ulysses size) with dynamic batch sizes, else micro-batch rows x
    (prompt + response length). With remove-padding that is the length of the one packed sequence."""
    arr = config.actor_rollout_ref
    length = int(config.data.max_prompt_length) + int(config.data.max_response_length)
    sp = int(_get(arr, "actor.ulysses_sequence_parallel_size", 1) or 1)
    passes = (("actor.use_dynamic_bsz", "actor.ppo_max_token_len_per_gpu", "actor.ppo_micro_batch_size_per_gpu"),
              ("rollout.log_prob_use_dynamic_bsz", "rollout.log_prob_max_token_len_per_gpu",
               "rollout.log_prob_micro_batch_size_per_gpu"),
              ("ref.log_prob_use_dynamic_bsz", "ref.log_prob_max_token_len_per_gpu", "ref.log_prob_micro_batch_size_per_gpu"))
    sizes = [length]  # one sequence longer than the budget still makes a micro-batch of its own
    for dynamic, budget, rows in passes:
        if bool(_get(arr, dynamic, False)) and _get(arr, budget) is not None:
            sizes.append(int(_get(arr, budget)) * sp)
        elif _get(arr, rows) is not None:
            sizes.append(int(_get(arr, rows)) * length)
    return max(sizes)


def attention_line(config, why: str) -> str:
    """The one line saying which attention the actor loads with, why, and what remove-padding costs without
    flash-attn: verl packs each micro-batch into one sequence; flash-attn's varlen kernel attends within each
    row, while sdpa (or eager) attends through a dense L x L block-diagonal mask built from the restarting
    position ids. Exact, and it keeps memory at verl's token budget (padding would not), but attention costs
    O(L^2) over the whole pack, not the sum over its rows."""
    model = config.actor_rollout_ref.model
    impl = str(_get(model, "override_config.attn_implementation", None) or "flash_attention_2")
    line = f"devenus: attention: {impl} ({why}; decided on this launch host: every node needs the same install)"
    if impl != "flash_attention_2" and bool(model.get("use_remove_padding", False)):
        n = packed_tokens(config)
        line += (f"; use_remove_padding=True packs each micro-batch (up to {n:,} tokens) into one sequence that "
                 f"{impl} attends through a dense block-diagonal mask: exact, but attention costs O(L^2) over the "
                 f"pack and a {n * n / 2**30:.1f} GiB mask at L = {n:,} (install flash-attn, or set "
                 f"actor_rollout_ref.model.use_remove_padding=False to pad rows instead)")
    return line


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
    for part, checked in (("rollout", True), ("ref", use_reference_policy)):  # the log-prob passes
        if checked and not bool(_get(arr, f"{part}.log_prob_use_dynamic_bsz", False)) \
                and _get(arr, f"{part}.log_prob_micro_batch_size_per_gpu") is None:
            errors.append(f"actor_rollout_ref.{part}.log_prob_use_dynamic_bsz=False needs "
                          f"actor_rollout_ref.{part}.log_prob_micro_batch_size_per_gpu")
    return errors


# ----------------------------------------------------------------------------- paths on a cluster
#: where verl reads the actor's model (a folder, or a hub name)
MODEL_KEY = "actor_rollout_ref.model.path"
#: config keys holding file-system paths that Ray processes read or write; verl's runtime env sets no working
#: directory (``working_dir: None``), so on another node a relative one resolves against that node's own
PATH_KEYS = ("data.train_files", "data.val_files", "trainer.default_local_dir", "trainer.validation_data_dir",
             "trainer.rollout_data_dir", "trainer.resume_from_path", "devenus.evidence_dir", MODEL_KEY,
             "actor_rollout_ref.model.tokenizer_path", "actor_rollout_ref.model.lora.adapter_path",
             "data.custom_cls.path", "reward.custom_reward_function.path")
#: the keys of :data:`PATH_KEYS` that also take a hub name (``Qwen/Qwen3-4B-Base``): a path only where it exists here
HUB_KEYS = (MODEL_KEY, "actor_rollout_ref.model.tokenizer_path", "actor_rollout_ref.model.lora.adapter_path")


def cwd_relative(key: str, value) -> bool:
    """Whether ``value`` of config key ``key`` is a path resolved against the working directory (not absolute,
    ``~``, a URL, ``pkg://`` or an interpolation; for :data:`HUB_KEYS` only a folder that exists here or
    starts with a dot, as a hub name is not a path)."""
    v = str(value).strip().strip("'\"")
    if not v or "://" in v or v.startswith(("/", "~", "$", "pkg:")):
        return False
    return (os.path.exists(v) or v.startswith(".")) if key in HUB_KEYS else True


def absolute_path_overrides(overrides: list[str]) -> list[str]:
    """``overrides`` with every relative path of a :data:`PATH_KEYS` key made absolute on this host (lists
    ``[a,b]`` item by item): verl's Ray processes on other nodes then read and write the same files, given a
    file system mounted at the same place on every node. ``os.path.abspath``, not ``realpath``: a symlinked
    mount point stays what the user named, which the other nodes have too."""
    out = []
    for line in overrides:
        try:
            o = None if line.startswith("-") else parse_override_line(line)
        except OverrideError:  # left as given: composing it names the problem (a `~/x` Hydra cannot read)
            o = None
        if o is not None and o.key in PATH_KEYS and not o.delete and o.value is not None:
            items = o.value if isinstance(o.value, list) else [o.value]
            fixed = [os.path.abspath(str(p)) if isinstance(p, str) and cwd_relative(o.key, p) else p for p in items]
            if fixed != items:
                line = f"{o.prefix}{o.key}={hydra_value(fixed if isinstance(o.value, list) else fixed[0])}"
        out.append(line)
    return out


def cluster_reason(config, env=None) -> str | None:
    """Why the job's Ray processes may run on other hosts (None: this host's own Ray): ``trainer.nnodes > 1``,
    ``ray_kwargs.ray_init.address`` (other than ``local``) or ``RAY_ADDRESS``."""
    env = os.environ if env is None else env
    if int(config.trainer.nnodes) > 1:
        return f"trainer.nnodes={config.trainer.nnodes}"
    address = _get(config, "ray_kwargs.ray_init.address")
    if address is not None and str(address).lower() not in ("local", "null", "none", ""):
        return f"ray_kwargs.ray_init.address={address}"
    if env.get("RAY_ADDRESS"):
        return f"RAY_ADDRESS={env['RAY_ADDRESS']}"
    return None


def relative_path_errors(config, env=None) -> list[str]:
    """One line naming every relative path of :data:`PATH_KEYS` when the job runs on a Ray cluster
    (:func:`cluster_reason`); empty on one host, where verl's processes share the launch directory."""
    reason = cluster_reason(config, env)
    if reason is None:
        return []
    bad = []
    for key in PATH_KEYS:
        value = _get(config, key)
        if value is None:
            continue
        values = [value] if isinstance(value, str) else list(value)
        bad += [f"{key}={v}" for v in values if cwd_relative(key, v)]
    if not bad:
        return []
    return [f"relative path(s) on a Ray cluster ({reason}): {', '.join(bad)}; verl gives its Ray processes no "
            f"working directory, so each node would resolve them against its own: give absolute paths on a file "
            f"system every node mounts at the same place"]
