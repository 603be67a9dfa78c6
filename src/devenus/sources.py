"""Named models and pools, or paths: what selection, training and evaluation load a model or a pool from.

A pool is a records Parquet, or a registered pool name (``testbed-pool``: the testbed's candidate pool,
built and cached on first use). A model is an HF model folder (or hub id), or a registered model name
(``testbed``: the testbed's base model; ``smollm2``: SmolLM2-135M-Instruct, :mod:`devenus.smollm2`). Callers
ask only this module; the names are two registries on :mod:`devenus.registry` (:data:`POOLS`,
:data:`MODELS`), and a new named source is one :func:`register_pool` / :func:`register_model` call, never a
string in a caller.

A model's identity (:func:`model_identity`) is the content hash of its weight files, so a stage made
with other weights (a folder rewritten in place) is never reused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from devenus.registry import Registry


def _testbed_model() -> Path:
    from devenus.testbed import build_testbed

    return Path(build_testbed(log=lambda *_: None).model_dir)


#: pool name -> the function building its records Parquet (a "module:function" is imported on first use)
POOLS: Registry[Callable[[], Path]] = Registry("pool", lazy={
    "testbed-pool": "devenus.testbed.pool:build_pool",
    "smollm2-pool": "devenus.smollm2:chat_pool",
})
#: model name -> the function giving its HF folder
MODELS: Registry[Callable[[], Path]] = Registry("model", lazy={"smollm2": "devenus.smollm2:model_dir"})
MODELS.register("testbed", _testbed_model)
#: one line of help per named source (``devenus model list``)
_HELP: dict[tuple[str, str], str] = {
    ("pool", "testbed-pool"): "the testbed's candidate pool (unlabeled addition, 1-6 digits)",
    ("pool", "smollm2-pool"): "32 testbed addition questions (1-2 digits) phrased for a chat model",
    ("model", "testbed"): "the testbed's base model (~1M-parameter Qwen3)",
    ("model", "smollm2"): "SmolLM2-135M-Instruct (30-layer Llama, vocabulary 49,152; the smollm2 extra, docs/smollm2.md)",
}


def register_pool(name: str, build: Callable[[], Path] | str, help: str = "") -> None:
    """Make ``pool=<name>`` resolve to the Parquet ``build()`` returns (``build``: a function or ``"module:function"``)."""
    POOLS.register(name, build)
    _HELP[("pool", name)] = help


def register_model(name: str, folder: Callable[[], Path] | str, help: str = "") -> None:
    """Make ``generate.model=<name>`` resolve to the HF folder ``folder()`` returns."""
    MODELS.register(name, folder)
    _HELP[("model", name)] = help


def pool_names() -> list[str]:
    return POOLS.names()


def model_names() -> list[str]:
    return MODELS.names()


def model_sources() -> list[tuple[str, str]]:
    """(name, one line of help) of every named model (imports their modules)."""
    return [(n, _HELP.get(("model", n), "")) for n, _ in MODELS.items()]


def resolve_pool(name: str) -> Path:
    """The pool's records Parquet (a named pool is built on first use)."""
    if name in POOLS:
        return Path(POOLS.get(name)())
    p = Path(name)
    if not p.is_file():
        raise FileNotFoundError(2, f"No such file or directory (a records Parquet), and {POOLS.unknown(name)}", str(p))
    return p


def resolve_model(name: str) -> str:
    """A model folder (or hub id) transformers and vLLM can load: named models resolved, others as given."""
    return str(MODELS.get(name)()) if name in MODELS else name


def load_model(name: str, device: str | None = None):
    """``(model, tokenizer)`` for ``name``, on ``device`` (default: the first CUDA device when there is one, in
    the checkpoint's stored dtype; else the CPU in float32). A Ray Data actor that reserves a GPU sees it as
    its CUDA device, so its scoring and generation run there."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve_model(name)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = "auto" if device != "cpu" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device)
    return model, AutoTokenizer.from_pretrained(folder)


_hashes: dict[tuple, str] = {}


def model_identity(name: str) -> dict[str, str]:
    """``{"model": name, "model_sha256": ...}``: the weights' content hash (:func:`devenus.testbed.shipped.model_hash`,
    the one the experiments record), computed once per process for unchanged files (size and mtime key the
    cache, never the identity). A hub id that is not a local folder is identified by its name alone."""
    from devenus.testbed.shipped import model_hash

    folder = Path(resolve_model(name))
    if not folder.is_dir():
        return {"model": name}
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
    stamp = tuple((f.name, st.st_size, st.st_mtime_ns) for f in files for st in [os.stat(f)])
    key = (str(folder.resolve()), stamp)
    if key not in _hashes:
        try:
            _hashes[key] = model_hash(folder)
        except ValueError as e:
            raise ValueError(f"generate.model {name!r}: {e}") from None
    return {"model": name, "model_sha256": _hashes[key]}
