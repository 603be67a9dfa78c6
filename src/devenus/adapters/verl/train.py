"""``python -m devenus.train <verl overrides> devenus.method=<name>``: DE-Venus's training entry point.

verl's own Hydra config (``ppo_trainer``) plus the ``devenus`` overlay (``configs/devenus_trainer.yaml``);
every verl override works as it does with ``python -m verl.trainer.main_ppo``. On a machine with no
accelerator the CPU backend's environment and overrides are applied first (user overrides win).
Bad input fails here, before Ray starts, with a message that names what is wrong.
"""

from __future__ import annotations

import os
import sys
from devenus.adapters.verl.overlay import DevenusConfig, SetupError, check_overlay  # noqa: F401 (their home for callers)


def verl_check(config) -> None:
    """verl's own ``validate_config``: its rules are assertions; one :class:`SetupError` line instead."""
    from hydra.errors import InstantiationException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    # verl states its config rules as assertions, or as ValueErrors of its config dataclasses (which Hydra's
    # instantiate wraps); the message may span lines
    except (AssertionError, ValueError, TypeError, InstantiationException) as e:
        raise SetupError(f"verl's config check: {' '.join(str(e).split())}") from None


def _cpu_setup(argv: list[str]) -> list[str]:
    """``devenus.backend=auto|cpu|gpu``: print what was chosen and why; for the CPU backend, add its
    environment (never replacing a variable the user set) and its overrides (the user's come later and win)."""
    from devenus.adapters.verl.cpu.launch import BackendError, setup_backend
    from devenus.config.overrides import OverrideError

    try:
        argv, choice = setup_backend(argv)
    except (BackendError, OverrideError) as e:
        print(f"devenus.train: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    print(choice.message(), flush=True)
    return argv


def _data_files(value) -> list[str]:
    from omegaconf import OmegaConf

    value = OmegaConf.to_container(value, resolve=True) if not isinstance(value, str) else value
    return [value] if isinstance(value, str) else list(value)


def _identity_columns(path: str) -> tuple[list, list]:
    """``extra_info`` and ``reward_model`` of every row, read without the full record contract."""
    names = ("extra_info", "reward_model")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=[c for c in names if c in pq.read_schema(path).names])
        columns, n = table.to_pydict(), table.num_rows
    else:
        import pandas as pd

        frame = pd.read_json(path, lines=path.endswith(".jsonl"))
        columns, n = {c: frame[c].tolist() for c in names if c in frame.columns}, len(frame)
    return columns.get("extra_info", [None] * n), columns.get("reward_model", [None] * n)


def _check_budget(config, rollouts: int) -> None:
    """A rollout budget stops only at a validation step: refused before Ray starts when there is none."""
    from devenus.online.budget import check_budget

    if (why := check_budget(rollouts, int(config.trainer.get("test_freq", -1)))) is not None:
        raise SetupError(why)


def check_setup(config) -> DevenusConfig:
    """The typed ``devenus`` config, once these hold: method known, method config valid, every row keyed by ``extra_info.index``, the label states the
    method's ``data_needs`` ask for present, and (``devenus.validate_data``) the full record contract."""
    from devenus.adapters.verl.task_runner import build_method
    from devenus.online.rollouts import RowKeyError, row_identity

    overlay = check_overlay(config)
    try:
        spec, method = build_method(overlay)
    except (KeyError, ValueError, TypeError, NotImplementedError) as e:  # a config that cannot run: a message
        raise SetupError(str(e.args[0] if isinstance(e, KeyError) else e)) from None
    _check_rollouts(config, spec.name, method)
    _check_sampling(config, overlay.dynamic_sampling, method, overlay.skip)
    _check_engine(config, spec.name, method)
    _check_budget(config, overlay.budget.rollouts)
    validate = overlay.validate_data
    labeled, train_rows = [], []
    for kind in ("train_files", "val_files"):
        for path in _data_files(config.data[kind]):
            if not os.path.exists(path):
                raise SetupError(f"data.{kind}: {path} does not exist")
            if validate:
                from devenus.records import RecordError, read_records

                try:
                    rows = read_records(path)
                except RecordError as e:
                    raise SetupError(f"data.{kind}: {path} breaks the record contract:\n{e}") from None
                infos, rewards = [r.get("extra_info") for r in rows], [r.get("reward_model") for r in rows]
            else:
                infos, rewards = _identity_columns(path)
            # the stable key is checked whatever validate_data says: every join across steps relies on it
            try:
                states = [row_identity(e, r, f"row {i}")[1] for i, (e, r) in enumerate(zip(infos, rewards))]
            except RowKeyError as e:
                raise SetupError(f"data.{kind}: {path}: {e}") from None
            if kind == "train_files":
                labeled += states
                if validate:
                    train_rows += rows
    n_lab = sum(labeled)
    if "labels" in method.data_needs and n_lab == 0:
        raise SetupError(f"method {spec.name!r} needs labeled rows; the training data has none")
    if "unlabeled" in method.data_needs and n_lab == len(labeled):
        raise SetupError(
            f"method {spec.name!r} constructs supervision for unlabeled rows, but every training row is labeled "
            f"(rows without extra_info.labeled count as labeled when they carry a target; hide labels with "
            f"`devenus data hide-labels`)"
        )
    if "paraphrases" in method.data_needs and validate:
        from devenus.records.pairs import pair_problems

        problems = pair_problems(train_rows)
        if problems:
            raise SetupError(f"method {spec.name!r} trains on paired views of each question (extra_info.pair_key), "
                             f"but the training data is not paired (build it with `devenus data pair-views`):\n  "
                             + "\n  ".join(problems))
    return overlay


def _check_engine(config, name: str, method) -> None:
    """Statistics taken from the full logits cannot come from a fused-kernel forward (it never
    materialises them); the engine would refuse it inside Ray, after start-up."""
    from devenus.adapters.verl.token_stats import SELF_CERTAINTY, requested_stats

    if SELF_CERTAINTY in requested_stats(method.step_needs) and \
            bool(config.actor_rollout_ref.model.get("use_fused_kernels", False)):
        raise SetupError(f"method {name!r} takes self-certainty from the full logits, which fused kernels never "
                         f"materialise: set actor_rollout_ref.model.use_fused_kernels=False")


def _check_rollouts(config, name: str, method) -> None:
    """Vote-on-N settings and the batch shapes the pair sampler needs."""
    n = int(config.actor_rollout_ref.rollout.n)
    try:
        extra = list(method.extra_rollouts(n))
    except ValueError as e:
        raise SetupError(f"devenus.method_config of {name!r}: {e}") from None
    batch = int(config.data.get("gen_batch_size", None) or config.data.train_batch_size)
    workers = int(config.actor_rollout_ref.rollout.agent.get("num_workers", 1) or 1)
    generations = []  # (rollouts per prompt, what they are) of each generate call that is not verl's own
    if extra:
        generations.append((n + len(extra), "votes"))
    if "teacher" in method.step_needs:
        generations.append((method.teacher_rollouts(n), "teacher votes"))
    for k, what in generations:
        if (batch * k) % workers:
            raise SetupError(f"{batch} prompts x {k} {what} = {batch * k} rollouts cannot be split evenly over "
                             f"actor_rollout_ref.rollout.agent.num_workers={workers}")
    if "paraphrases" in method.data_needs and batch % 2:
        raise SetupError(f"method {name!r} puts both views of a question in the same step: data.train_batch_size "
                         f"must be even (pairs x 2), got {batch}")


#: advantage estimators that compare a response with its own group (by uid): a zero-variance group gets zero
#: advantage, which is what makes dropping it free; others (GAE, REINFORCE++, ReMax, ...) learn from it
GROUP_ESTIMATORS = ("grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized", "opo")


def _check_sampling(config, ds: DynamicSamplingConfig, method, skip: SkipConfig | None = None) -> None:
    """Dynamic sampling runs inside the log-prob pass, judges groups by uid and generates refill rounds;
    skipping refills the skipped prompts' slots the same way, so it needs the same."""
    if not ds.enabled and not (skip is not None and skip.enabled):
        return
    on = ds.key("enabled") if ds.enabled else skip.key("enabled")  # the errors name the key the user turned on
    rc = config.algorithm.get("rollout_correction", None)
    if rc is not None and bool(rc.get("bypass_mode", False)):
        raise SetupError(f"{on}=true refills inside the old-log-prob pass, which "
                         f"algorithm.rollout_correction.bypass_mode=true skips: turn one of them off")
    est = str(config.algorithm.adv_estimator)
    if est not in GROUP_ESTIMATORS:
        raise SetupError(f"{on}=true leaves out groups whose rewards are all equal, which only a group "
                         f"estimator ignores; algorithm.adv_estimator={est} is not one ({', '.join(GROUP_ESTIMATORS)})")
    # auto-sized rounds (refill_prompts=0) are rounded up to refill_granule, which divides any k that passes
    k = ds.prompts_per_round(int(config.data.train_batch_size))
    workers = int(config.actor_rollout_ref.rollout.agent.get("num_workers", 1) or 1)
    from devenus.adapters.verl.sampling import refill_rollouts

    for r in refill_rollouts(config, method):
        if (k * r) % workers:
            raise SetupError(f"{ds.key('refill_prompts')}: {k} refill prompts x {r} rollouts = {k * r} cannot be split "
                             f"evenly over actor_rollout_ref.rollout.agent.num_workers={workers}")


def preflight(overrides: list[str]):
    """Every check ``devenus.train`` runs before Ray starts, on the composed config, without starting
    anything: DE-Venus's :func:`check_setup` and verl's own ``validate_config``. Returns the config.
    (Recipes' dry runs use it: a GPU recipe is checked on a machine without a GPU.)"""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    from devenus.adapters.verl.cluster_rules import import_verl_quietly

    import_verl_quietly()  # before any verl import: its optional engines' warnings would bury the result
    from devenus.adapters.verl.cluster_rules import attention_line, choose_attention, plugin_problem

    if (problem := plugin_problem()) is not None:
        raise SetupError(problem)
    from devenus.config.overrides import OverrideError

    try:
        overrides, why = choose_attention(list(overrides))
    except OverrideError as e:
        raise SetupError(str(e)) from None
    try:
        with initialize_config_module(config_module="devenus.configs", version_base=None):
            config = compose("devenus_trainer", overrides=list(overrides))
    except HydraException as e:  # an override that does not fit the config tree
        raise SetupError(f"the overrides do not compose: {e}") from None
    print(attention_line(config, why), flush=True)
    check_setup(config)
    check_cluster(config)
    verl_check(config)
    return config


def check_cluster(config) -> None:
    """The rules verl checks only after Ray starts (batch shapes at the cluster's size) and, on a Ray cluster,
    paths that each node would resolve against its own working directory: one :class:`SetupError` line."""
    from verl.trainer.ppo.utils import need_reference_policy

    from devenus.adapters.verl.cluster_rules import cluster_errors, relative_path_errors

    errors = cluster_errors(config, use_reference_policy=need_reference_policy(config)) + relative_path_errors(config)
    if errors:
        raise SetupError("; ".join(errors))


def _count_launch() -> None:
    """One line per verl trainer started, in ``$DEVENUS_LAUNCH_LOG`` when set: scripts/test.sh counts the
    suite's launches with it (appends of one short line are atomic on a local file system)."""
    path = os.environ.get("DEVENUS_LAUNCH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('PYTEST_CURRENT_TEST', '-').split(' ')[0]}\n")


def main(argv: list[str] | None = None) -> int:
    from devenus.adapters.verl.cluster_rules import attention_line, choose_attention, plugin_problem

    argv, why = choose_attention(_cpu_setup(list(sys.argv[1:] if argv is None else argv)))
    import hydra

    result: dict = {}

    @hydra.main(config_path="pkg://devenus.configs", config_name="devenus_trainer", version_base=None)
    def _run(config) -> None:
        from verl.trainer.main_ppo import run_ppo
        from verl.utils.device import auto_set_device

        from devenus.adapters.verl.task_runner import DeVenusTaskRunner, InDriverTaskRunner

        print(attention_line(config, why), flush=True)
        try:
            if (problem := plugin_problem()) is not None:
                raise SetupError(problem)
            overlay = check_setup(config)
            check_cluster(config)
            auto_set_device(config)
            verl_check(config)  # as preflight() does: one line and exit 2, not verl's traceback
        except SetupError as e:
            print(f"devenus.train: error: {e}", file=sys.stderr)
            result["rc"] = 2
            return
        in_driver = overlay.task_runner == "driver"
        _count_launch()
        run_ppo(config, task_runner_class=InDriverTaskRunner() if in_driver else DeVenusTaskRunner)
        result["rc"] = 0

    sys.argv = [sys.argv[0]] + argv
    _run()
    return result.get("rc", 1)


if __name__ == "__main__":
    sys.exit(main())
