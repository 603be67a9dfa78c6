"""The selection run's configuration: one YAML/JSON file (or defaults) for all four stages.

Every stage records the config sections it depends on in its output folder; a rerun with a different
config refuses to mix outputs (use a new folder, or ``--force`` to start the stage over).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from devenus.config import Config, ConfigError, load_config_file, option, suggest
from devenus.config import section as nested
from devenus.generate import BACKENDS
from devenus.select.route.router import ROUTERS, RouteConfig, get_router
from devenus.select.signal_table import DEFAULT_SIGNALS, MODEL_SIGNALS, SIGNALS  # noqa: F401 (re-exported)

AGGREGATIONS = ("mean", "median", "majority")
#: ``route.signal: random``: no score; questions ranked by the seeded tie-breaker alone (a uniform random
#: order, drawn by ``route.seed``), the baseline every signal is measured against
RANDOM = "random"


class _Section(Config):
    """A part of the selection config: its keys are set in the file or with ``--set <path>.<key>=<value>``."""

    @classmethod
    def override(cls, key: str, value: str = "<value>") -> str:
        return f"--set {cls.key(key)}={value}"


@dataclass
class GenerateConfig(_Section):
    key_path: ClassVar[str] = "generate"

    model: str = option("testbed", "a HF model folder, or testbed for the testbed's base model")
    generator: str = option("hf", "hf (CPU, the default) or vllm (GPUs; the optional extra devenus[vllm]), or "
                                  "another backend registered in devenus.generate.BACKENDS")
    samples: int = option(8, "G: responses sampled per question", ge=1)
    temperature: float = option(1.0, "sampling temperature", gt=0.0)
    top_p: float = option(1.0, "nucleus sampling mass", gt=0.0, le=1.0)
    max_new_tokens: int = option(96, "the training max response length", ge=1)
    batch_size: int = option(64, "sequences per generate() call (hf)", ge=1)
    seed: int = option(0, "sampling seed", ge=0)
    # vllm engine; how much of the GPU it takes does not change the samples
    gpu_memory_utilization: float = option(0.85, "vllm: share of the GPU's memory the engine takes", gt=0.0, le=1.0)
    tensor_parallel_size: int = option(1, "vllm: GPUs per engine", ge=1)
    max_model_len: int | None = option(None, "vllm: the engine's context length (null: the model's)", ge=1)
    # resources of each Ray Data actor (--actors N): GPU actors on a cluster, CPU actors here
    actor_cpus: float = option(1.0, "CPUs of each Ray Data actor (--actors N)", ge=0.0)
    actor_gpus: float = option(0.0, "GPUs of each Ray Data actor (--actors N)", ge=0.0)
    ray_address: str = option("local", "--actors N: local (a fresh Ray on this machine) or the address of a "
                                       "running Ray cluster to join (auto, <host>:6379)")

    def check(self) -> None:
        if self.generator not in BACKENDS:
            raise ConfigError(f"{self.key('generator')}: {BACKENDS.unknown(self.generator)} "
                              f"(set it with {self.override('generator')})")


#: generate keys that do not change the samples: left out of the stage's identity (resuming on another
#: machine or with another actor size reuses the shards)
RESOURCE_KEYS = ("gpu_memory_utilization", "actor_cpus", "actor_gpus", "ray_address")
#: score keys that do not change the scores (left out of the score stage's identity)
SCORE_RESOURCE_KEYS = ("max_batch_tokens",)
#: new keys at their old behaviour are left out of the identity too, so runs made before they existed resume
IDENTITY_DEFAULTS = {"generator": "hf", "top_p": 1.0, "tensor_parallel_size": 1, "max_model_len": None}
#: keys that only refuse or warn, never change a decision: left out of their stage's identity
CHECK_KEYS = {"route": ("min_spread", "on_constant_signal")}


@dataclass
class ScoreConfig(_Section):
    key_path: ClassVar[str] = "score"

    signals: tuple[str, ...] = option(DEFAULT_SIGNALS, "the uncertainty signals computed per question",
                                      choices=SIGNALS)
    aggregation: str = option("mean", "per-sample to per-question: mean, median, or majority (mean over the "
                                      "majority cluster's samples)", choices=AGGREGATIONS)
    batch_size: int = option(32, "sequences per teacher-forced forward (at most)", ge=1)
    # the padded tokens of one forward (sequences x the longest, longest first) bound its memory, not the
    # count. Per padded token at Qwen3-4B (d 2,560, 32 query heads, bf16), the peak is <= ~200 KB:
    # PivotTrace's query-chunk temporaries 3 x 32 heads x pivot_chunk 256 x 4 B = 96 KB plus its fp32 GQA keys
    # 32 x 128 x 4 B = 16 KB and bf16 Q, K 10 KB, CoT-Kinetics' two fp32 states kept across layers 2 x 2,560 x
    # 4 B = 20 KB (its
    # hook's own ~40 KB and the layer's bf16 MLP 4 x 9,728 x 2 B = 78 KB come at other moments), the
    # residual stream and norm 10 KB, the padding mask ~5 B x T = 40 KB at T = 8k. 131,072 tokens (16
    # sequences of 8k) x 200 KB = 26 GB, + 8 GB of weights: ~34 GB on an 80 GB card (Qwen3-8B: ~49 GB).
    max_batch_tokens: int | None = option(131072, "padded tokens per teacher-forced forward (sequences x the "
                                                  "longest), the memory bound; a longer sequence goes alone "
                                                  "(null: only batch_size)", ge=1)
    token_chunk: int = option(512, "tokens per chunk of the forward's statistics", ge=1)
    vocab_chunk: int = option(8192, "vocabulary entries per chunk of the entropy", ge=1)
    pivot_window: int = option(256, "PivotTrace: attention mass more than this many tokens back", ge=1)
    pivot_chunk: int = option(256, "PivotTrace: queries per chunk", ge=1)


#: the annotation sources (select/annotate.py): what ``materialize.annotation`` may say
ANNOTATION_SOURCES = "simulation, file:<path> or callable:<module>:<function>"


def annotation_spec(spec: str) -> tuple[str, tuple[str, ...]] | None:
    """``(kind, arguments)`` of an annotation source spec, or None when it is not one."""
    if spec == "simulation":
        return "simulation", ()
    kind, sep, rest = spec.partition(":")
    if kind == "file" and sep and rest.strip():
        return "file", (rest,)
    if kind == "callable" and sep:
        module, sep2, fn = rest.partition(":")
        if sep2 and all(p.isidentifier() for p in module.split(".")) and fn.isidentifier():
            return "callable", (module, fn)
    return None


@dataclass
class MaterializeConfig(_Section):
    key_path: ClassVar[str] = "materialize"

    annotation: str = option("simulation", f"where the answers of annotated questions come from: {ANNOTATION_SOURCES}")
    out: str | None = option(None, "the output Parquet (null: <run>/selected.parquet)")

    def check(self) -> None:
        if annotation_spec(self.annotation) is None:
            raise ConfigError(f"{self.key('annotation')} must be {ANNOTATION_SOURCES}, got {self.annotation!r} "
                              f"(set it with {self.override('annotation')})")


@dataclass
class SelectConfig(_Section):
    key_path: ClassVar[str] = ""

    pool: str = option("testbed-pool", "a records Parquet, or testbed-pool for the testbed's candidate pool")
    out: str = option("outputs/select", "the run folder (one subfolder per stage)")
    shard_size: int = option(64, "questions per shard", ge=1)
    limit: int | None = option(None, "only the first N questions of the pool (tests, quick looks)", ge=1)
    generate: GenerateConfig = nested(GenerateConfig)
    score: ScoreConfig = nested(ScoreConfig)
    route: RouteConfig = nested(RouteConfig, "the router: route.selector and the keys that router reads")
    materialize: MaterializeConfig = nested(MaterializeConfig)

    def check(self) -> None:
        s, r = self.score, self.route
        if r.selector not in ROUTERS:  # the section built as given (not from a mapping)
            raise ConfigError(f"route.selector: {ROUTERS.unknown(r.selector)}")
        if not isinstance(r, get_router(r.selector).config_class):
            raise ConfigError(f"route: a {type(r).__name__}, not the {r.selector!r} router's "
                              f"{get_router(r.selector).config_class.__name__}")
        why_not = get_router(r.selector).check(self)
        if why_not is not None:
            raise ConfigError(why_not)
        if r.signal == RANDOM:
            if r.calibrate_sign:
                raise ConfigError("route.signal=random has no scores to calibrate: use it with the ratio or interval "
                                  "selector and route.calibrate_sign false")
        elif r.signal not in s.signals:
            close = suggest(r.signal, [*s.signals, RANDOM])
            raise ConfigError(f"route.signal {r.signal!r} is not among score.signals {list(s.signals)} "
                              f"(or {RANDOM!r}, a seeded random order)" + (f"; did you mean {close!r}?" if close else ""))

    def check_sources(self) -> "SelectConfig":
        """The annotation source can be read: its file exists, its callable imports. Checked before a stage
        that needs the answers (routing with probes, materialize) starts, not when it asks for them."""
        kind, args = annotation_spec(self.materialize.annotation)
        if kind == "file" and not Path(args[0]).is_file():
            raise ConfigError(f"materialize.annotation: the answer file {args[0]} does not exist "
                              f"(set it with {self.override('materialize.annotation', 'file:<path>')})")
        if kind == "callable":
            import importlib

            try:
                fn = getattr(importlib.import_module(args[0]), args[1], None)
            except ImportError as e:
                raise ConfigError(f"materialize.annotation: cannot import {args[0]}: {e}") from None
            if not callable(fn):
                raise ConfigError(f"materialize.annotation: {args[0]} has no function {args[1]!r}")
        return self

    def section(self, *names: str) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if "route" in names:  # the flat-config routers' keys at their defaults (route_identity_defaults)
            d["route"] = {**route_identity_defaults(), **d["route"]}
        return {n: {k: v for k, v in d[n].items() if k not in CHECK_KEYS.get(n, ())} for n in names}

    def score_identity(self) -> dict[str, Any]:
        """The score settings that decide the scores (the memory bound only regroups the same forwards)."""
        return {"score": {k: v for k, v in dataclasses.asdict(self.score).items() if k not in SCORE_RESOURCE_KEYS}}

    def generate_identity(self) -> dict[str, Any]:
        """The generate settings that decide the samples (what a stage folder is checked against)."""
        return {"generate": {k: v for k, v in dataclasses.asdict(self.generate).items()
                             if k not in RESOURCE_KEYS and not (k in IDENTITY_DEFAULTS and v == IDENTITY_DEFAULTS[k])}}


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=list).encode()).hexdigest()[:16]


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> SelectConfig:
    """A :class:`SelectConfig` from a YAML/JSON file (missing keys take the defaults) plus dotted
    ``overrides`` (``{"generate.samples": 4}``); every value checked here, before any stage runs."""
    return load_config_file(SelectConfig, path, overrides)


#: the routers whose keys one flat route config held before each router had its own (see route_identity_defaults)
FLAT_IDENTITY_ROUTERS = ("interval", "ratio", "triage")


def route_identity_defaults() -> dict[str, Any]:
    """The route stage's identity keeps the shape it had when one flat config held these routers' keys: their
    keys at their defaults, overlaid by the chosen router's config. So the identity of an unchanged config is
    what earlier runs recorded, and their folders resume. A router added since adds only its own keys, and
    only to its own identity."""
    out: dict[str, Any] = {}
    for name in FLAT_IDENTITY_ROUTERS:
        out.update(dataclasses.asdict(get_router(name).config_class()))
    return out

