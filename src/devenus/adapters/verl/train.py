"""``python -m devenus.train <verl overrides> devenus.method=<name>``: DE-Venus's training entry point.

verl's own Hydra config (``ppo_trainer``) plus the ``devenus`` overlay (``config/devenus_trainer.yaml``);
every verl override works as it does with ``python -m verl.trainer.main_ppo``. On a machine with no
accelerator the CPU backend's environment and overrides are applied first (user overrides win).
Bad input fails here, before Ray starts, with a message that names what is wrong.
"""

from __future__ import annotations

import os
import sys


class SetupError(RuntimeError):
    """A configuration or data problem found before training starts."""


def _cpu_setup(argv: list[str]) -> list[str]:
    from devenus.adapters.verl.cpu.launch import cpu_env, cpu_overrides, has_accelerator

    if has_accelerator() or os.environ.get("DEVENUS_VERL_CPU", "").lower() in ("0", "false"):
        return argv
    os.environ.update(cpu_env(dict(os.environ)))
    return cpu_overrides() + argv


def check_setup(config) -> None:
    """Method known, method config valid, data files honour the record contract and the method's needs."""
    from omegaconf import OmegaConf

    from devenus.adapters.verl.task_runner import build_method

    try:
        spec, method = build_method(config)
    except (KeyError, ValueError, TypeError, NotImplementedError) as e:  # a config that cannot run: a message
        raise SetupError(str(e.args[0] if isinstance(e, KeyError) else e)) from None
    _check_rollouts(config, spec.name, method)
    if not config.devenus.get("validate_data", True):
        return
    from devenus.records import RecordError, read_records

    def files(v):
        v = OmegaConf.to_container(v, resolve=True) if not isinstance(v, str) else v
        return [v] if isinstance(v, str) else list(v)

    train_rows = []
    for kind in ("train_files", "val_files"):
        for path in files(config.data[kind]):
            if not os.path.exists(path):
                raise SetupError(f"data.{kind}: {path} does not exist")
            try:
                rows = read_records(path)
            except RecordError as e:
                raise SetupError(f"data.{kind}: {path} breaks the record contract:\n{e}") from None
            if kind == "train_files":
                train_rows += rows
    n_lab = sum(bool(r["extra_info"]["labeled"]) for r in train_rows)
    if "labels" in method.needs and n_lab == 0:
        raise SetupError(f"method {spec.name!r} needs labeled rows; the training data has none")
    if "unlabeled" in method.needs and n_lab == len(train_rows):
        raise SetupError(
            f"method {spec.name!r} constructs supervision for unlabeled rows, but every training row is labeled "
            f"(hide labels with `devenus data hide-labels`)"
        )
    if "paraphrases" in method.needs:
        from devenus.records.pairs import pair_problems

        problems = pair_problems(train_rows)
        if problems:
            raise SetupError(f"method {spec.name!r} trains on paired views of each question (extra_info.pair_key), "
                             f"but the training data is not paired (build it with `devenus data pair-views`):\n  "
                             + "\n  ".join(problems))


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
    if "teacher" in method.needs:
        generations.append((method.teacher_rollouts(n), "teacher votes"))
    for k, what in generations:
        if (batch * k) % workers:
            raise SetupError(f"{batch} prompts x {k} {what} = {batch * k} rollouts cannot be split evenly over "
                             f"actor_rollout_ref.rollout.agent.num_workers={workers}")
    if "paraphrases" in method.needs and batch % 2:
        raise SetupError(f"method {name!r} puts both views of a question in the same step: data.train_batch_size "
                         f"must be even (pairs x 2), got {batch}")


def main(argv: list[str] | None = None) -> int:
    argv = _cpu_setup(list(sys.argv[1:] if argv is None else argv))
    import hydra

    result: dict = {}

    @hydra.main(config_path="pkg://devenus.config", config_name="devenus_trainer", version_base=None)
    def _run(config) -> None:
        from verl.trainer.main_ppo import run_ppo
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config
        from verl.utils.device import auto_set_device

        from devenus.adapters.verl.task_runner import DeVenusTaskRunner

        try:
            check_setup(config)
        except SetupError as e:
            print(f"devenus.train: error: {e}", file=sys.stderr)
            result["rc"] = 2
            return
        auto_set_device(config)
        validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
        run_ppo(config, task_runner_class=DeVenusTaskRunner)
        result["rc"] = 0

    sys.argv = [sys.argv[0]] + argv
    _run()
    return result.get("rc", 1)


if __name__ == "__main__":
    sys.exit(main())
