"""A verl checkpoint as a Hugging Face model folder, through verl's own model merger.

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
from pathlib import Path

from devenus.records.io import atomic_dir

__all__ = ["resolve_actor_dir", "is_verl_checkpoint", "merge_to_hf"]

MERGED_DIRNAME = "huggingface_merged"


def resolve_actor_dir(path: str | os.PathLike) -> Path:
    """The FSDP actor folder of a verl checkpoint given as its root, a ``global_step_N`` or an ``actor`` folder."""
    p = Path(path)
    if (p / "fsdp_config.json").is_file():
        return p
    if (p / "actor" / "fsdp_config.json").is_file():
        return p / "actor"
    latest = p / "latest_checkpointed_iteration.txt"
    if latest.is_file():
        step = latest.read_text().strip()
        actor = p / f"global_step_{step}" / "actor"
        if (actor / "fsdp_config.json").is_file():
            return actor
        raise FileNotFoundError(f"{latest} names step {step}, but {actor} holds no FSDP checkpoint (fsdp_config.json)")
    raise FileNotFoundError(
        f"{p} is not a verl FSDP checkpoint: expected fsdp_config.json in it or in its actor/ folder, or a "
        f"latest_checkpointed_iteration.txt (a run's checkpoint root)")


def is_verl_checkpoint(path: str | os.PathLike) -> bool:
    try:
        resolve_actor_dir(path)
        return True
    except FileNotFoundError:
        return False


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
