"""verl's checkpoint folders: which steps are complete, DE-Venus's state pruned with verl's retention,
and a checkpoint as a Hugging Face model folder, through verl's own model merger.

A run's checkpoint root (``trainer.default_local_dir``) holds ``global_step_N/`` folders and verl's
resume pointer ``latest_checkpointed_iteration.txt``. verl 0.9.1's ``_save_checkpoint`` writes, in
order: the actor (``actor/``, by the workers), the dataloader state (``data.pt``), then the pointer.
DE-Venus writes its own per-step state (``devenus_*``: method, sampling, collapse guard, teacher
shards) into the same folder *before* verl's save, so the pointer, verl's last write, commits both.
verl's retention (``trainer.max_actor_ckpt_to_keep``, in the rank-0 worker's checkpoint manager)
removes only the ``actor/`` folders of the checkpoints this process saved (the oldest beyond the
limit, before and after each save); :func:`prune_step_state` removes DE-Venus's state beside them,
once per save, and :func:`retention_held` suspends verl's retention for one save.

verl saves the actor as FSDP shards (``global_step_N/actor/model_world_size_W_rank_R.pt``) beside a
``huggingface/`` folder holding the config and tokenizer only. ``verl.model_merger``'s
:class:`FSDPModelMerger` joins the shards into an HF folder; this module finds the actor folder from
whatever path a user gives (the run's checkpoint root, a ``global_step_N`` folder or its ``actor``)
and merges into a temporary folder that is renamed into place, so a crash never leaves a half-written
model. A merged folder is reused on the next call.

Note: verl 0.9.1's merger writes the weights in bfloat16 whatever the training dtype.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from devenus.atomic import atomic_dir

__all__ = ["TRACKER_FILE", "StepStateHooks", "complete_steps", "pointer_step", "prune_step_state", "retention_held",
           "resolve_actor_dir", "merge_to_hf"]

MERGED_DIRNAME = "huggingface_merged"
TRACKER_FILE = "latest_checkpointed_iteration.txt"  # verl's get_checkpoint_tracker_filename
STEP_PREFIX = "global_step_"
STATE_PREFIX = "devenus_"  # every entry DE-Venus writes into a global_step_N folder starts with this
DATALOADER_FILE = "data.pt"  # verl's dataloader state: its last write of a step before the pointer
# verl's retention keys, read by RayPPOTrainer._save_checkpoint at each save (seams.py)
RETENTION_KEYS = ("max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep", "remove_previous_ckpt_in_save")


class StepStateHooks:
    """The chain every trainer layer joins to keep per-step state beside verl's checkpoint.
    ``DeVenusTrainer._save_checkpoint`` calls ``save_step_state(folder)`` before verl's save (whose pointer,
    written last, commits it); ``DeVenusTrainer._load_checkpoint`` calls ``load_step_state(folder)`` after
    verl's load of a step > 0. Each layer writes only ``devenus_*`` entries (what :func:`prune_step_state`
    removes) and calls ``super()``; this base ends the chain."""

    def save_step_state(self, folder: str) -> None:
        pass

    def load_step_state(self, folder: str) -> None:
        pass


def _step_folders(root: str | os.PathLike) -> dict[int, Path]:
    root = Path(root)
    if not root.is_dir():
        return {}
    return {int(p.name[len(STEP_PREFIX):]): p for p in root.iterdir()
            if p.name.startswith(STEP_PREFIX) and p.name[len(STEP_PREFIX):].isdigit() and p.is_dir()}


def complete_steps(root: str | os.PathLike) -> list[int]:
    """Steps under ``root`` that verl can resume from: an ``actor/`` folder and ``data.pt`` (written after
    the actor, and after DE-Venus's state), in ascending order."""
    return sorted(s for s, p in _step_folders(root).items() if (p / "actor").is_dir() and (p / DATALOADER_FILE).is_file())


def pointer_step(root: str | os.PathLike) -> int | None:
    """The step verl's resume pointer names (None: no pointer, or not a step number)."""
    try:
        text = (Path(root) / TRACKER_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _is_state(name: str) -> bool:
    # a stale temporary file of an interrupted atomic write is DE-Venus's too (devenus.atomic names it
    # after its target, hidden or not)
    return name.startswith(STATE_PREFIX) or name.startswith("." + STATE_PREFIX)


def prune_step_state(root: str | os.PathLike, current: int) -> list[int]:
    """After verl's save of step ``current``: remove DE-Venus's state (``devenus_*``) from every
    ``global_step_N`` whose ``actor/`` folder verl's retention removed, and the folder itself when only
    verl's ``data.pt`` is left in it (nothing can resume from it). Never touches ``current``, the step
    the resume pointer names, or a folder that still holds an ``actor/``. Returns the steps pruned.

    Safe to interrupt: it removes only state no resume can use, so a kill part-way leaves a folder the
    next save's call finishes."""
    keep = {int(current), pointer_step(root)}
    pruned = []
    for step, folder in sorted(_step_folders(root).items()):
        if step in keep or (folder / "actor").exists():
            continue
        entries = list(folder.iterdir())
        state = [p for p in entries if _is_state(p.name)]
        for p in state:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        husk = all(_is_state(p.name) or p.name == DATALOADER_FILE for p in entries)
        if husk:
            shutil.rmtree(folder, ignore_errors=True)
        if state or husk:
            pruned.append(step)
    return pruned


@contextmanager
def retention_held(trainer_config, hold: bool = True):
    """``with retention_held(config.trainer): <verl's _save_checkpoint>``: that save removes no checkpoint
    (verl's retention keys read as unset, then restored). ``hold=False``: a no-op. verl's checkpoint
    manager still records the saved path, so its next unheld save prunes back to the limit."""
    if not hold:
        yield
        return
    from omegaconf import open_dict

    saved = {k: trainer_config[k] for k in RETENTION_KEYS if k in trainer_config}
    try:
        with open_dict(trainer_config):
            for k in saved:
                trainer_config[k] = None
        yield
    finally:
        with open_dict(trainer_config):
            for k, v in saved.items():
                trainer_config[k] = v


def resolve_actor_dir(path: str | os.PathLike) -> Path:
    """The FSDP actor folder of a verl checkpoint given as its root, a ``global_step_N`` or an ``actor`` folder."""
    p = Path(path)
    if (p / "fsdp_config.json").is_file():
        return p
    if (p / "actor" / "fsdp_config.json").is_file():
        return p / "actor"
    latest = p / TRACKER_FILE
    if latest.is_file():
        step = latest.read_text().strip()
        actor = p / f"global_step_{step}" / "actor"
        if (actor / "fsdp_config.json").is_file():
            return actor
        raise FileNotFoundError(f"{latest} names step {step}, but {actor} holds no FSDP checkpoint (fsdp_config.json)")
    raise FileNotFoundError(
        f"{p} is not a verl FSDP checkpoint: expected fsdp_config.json in it or in its actor/ folder, or a "
        f"latest_checkpointed_iteration.txt (a run's checkpoint root)")


def merge_to_hf(path: str | os.PathLike, target_dir: str | os.PathLike | None = None, force: bool = False) -> Path:
    """Merge the checkpoint's actor into an HF model folder (default: ``<actor>/huggingface_merged``)."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    actor = resolve_actor_dir(path)
    target = Path(target_dir) if target_dir else actor / MERGED_DIRNAME
    if target.is_dir() and (target / "config.json").is_file() and not force:
        return target
    hf_config = actor / "huggingface"
    if not (hf_config / "config.json").is_file():
        raise FileNotFoundError(f"{hf_config} has no config.json: verl saves the model config there with each checkpoint")
    with atomic_dir(target) as tmp:
        cfg = ModelMergerConfig(operation="merge", backend="fsdp", local_dir=str(actor), target_dir=str(tmp),
                                hf_model_config_path=str(hf_config))
        merger = FSDPModelMerger(cfg)
        merger.merge_and_save()
        merger.cleanup()
    return target
