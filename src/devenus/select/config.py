"""The selection run's configuration: one YAML/JSON file (or defaults) for all four stages.

Every stage records the config sections it depends on in its output folder; a rerun with a different
config refuses to mix outputs (use a new folder, or ``--force`` to start the stage over).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SIGNALS = ("accuracy", "consistency", "entropy", "self_certainty", "coe_r", "coe_c", "cot_kinetics", "pivot_trace")
MODEL_SIGNALS = ("entropy", "self_certainty", "coe_r", "coe_c", "cot_kinetics", "pivot_trace")
# pivot_trace is opt-in: its 256-token look-back means nothing on responses shorter than that
DEFAULT_SIGNALS = SIGNALS[:-1]  # need the teacher-forced forward
AGGREGATIONS = ("mean", "median", "majority")
INTERVALS = {"dapo": (0.0, 1.0, False, False), "balanced": (0.25, 0.75, True, True), "polaris": (0.0, 1.0, True, False)}
SELECTORS = ("interval", "ratio", "triage")
#: ``route.signal: random``: no score; questions ranked by the seeded tie-breaker alone (a uniform random
#: order, drawn by ``route.seed``), the baseline every signal is measured against
RANDOM = "random"
GENERATORS = ("hf", "vllm")


@dataclass
class GenerateConfig:
    model: str = "testbed"  # a HF model folder, or "testbed" for the testbed's base model
    generator: str = "hf"  # hf (CPU, the default) | vllm (GPUs; the optional extra devenus[vllm])
    samples: int = 8  # G
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 96  # the training max response length
    batch_size: int = 64  # sequences per generate() call (hf)
    seed: int = 0
    # vllm engine; how much of the GPU it takes does not change the samples
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    # resources of each Ray Data actor (--actors N): GPU actors on a cluster, CPU actors here
    actor_cpus: float = 1.0
    actor_gpus: float = 0.0


#: generate keys that do not change the samples: left out of the stage's identity (resuming on another
#: machine or with another actor size reuses the shards)
RESOURCE_KEYS = ("gpu_memory_utilization", "actor_cpus", "actor_gpus")
#: new keys at their old behaviour are left out of the identity too, so runs made before they existed resume
IDENTITY_DEFAULTS = {"generator": "hf", "top_p": 1.0, "tensor_parallel_size": 1, "max_model_len": None}


@dataclass
class ScoreConfig:
    signals: tuple[str, ...] = DEFAULT_SIGNALS
    aggregation: str = "mean"  # mean | median | majority (mean over the majority cluster's samples)
    batch_size: int = 32  # sequences per teacher-forced forward
    token_chunk: int = 512
    vocab_chunk: int = 8192
    pivot_window: int = 256  # PivotTrace: attention mass more than this many tokens back
    pivot_chunk: int = 256  # PivotTrace: queries per chunk


@dataclass
class RouteConfig:
    selector: str = "ratio"  # interval | ratio
    signal: str = "consistency"  # the uncertainty that ranks questions; "random": a seeded random order
    # interval: keep questions whose pass rate lies in the interval (preset or bounds), then the
    # `budget` most uncertain of them (None: all)
    interval: str = "dapo"  # dapo | balanced | polaris | custom
    low: float | None = None
    high: float | None = None
    budget: int | None = None
    # ratio: annotate the top rho_a by uncertainty, discard the bottom rho_d, weak for the rest
    rho_annotate: float = 0.293
    rho_discard: float = 0.421
    annotation_budget: int | None = None  # cap on annotated questions, probes included (overflow -> weak)
    # triage: probes drawn across the ranking, annotated, windowed -> thresholds (methods.md)
    probe_fraction: float = 0.03
    min_probes: int = 50
    window: int | None = None  # default max(5, probes // 10)
    isotonic: bool = False
    discard_pass_rate: float = 0.875  # t_discard: largest window u with pass rate >= this
    annotate_majority_below: float = 0.5  # t_annotate: smallest window u with majority correctness < this
    calibrate_sign: bool = False  # flip u when labeled rows (or triage probes) say it ranks the wrong way (AUROC < 0.5)
    seed: int = 0  # breaks ties between equal scores


@dataclass
class MaterializeConfig:
    annotation: str = "simulation"  # simulation | file:<path> | callable:<module>:<function>
    out: str | None = None  # default: <run>/selected.parquet


@dataclass
class SelectConfig:
    pool: str = "testbed-pool"  # a records Parquet, or "testbed-pool" for the testbed's candidate pool
    out: str = "outputs/select"
    shard_size: int = 64  # questions per shard
    limit: int | None = None  # only the first N questions of the pool (tests, quick looks)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    route: RouteConfig = field(default_factory=RouteConfig)
    materialize: MaterializeConfig = field(default_factory=MaterializeConfig)

    def validate(self) -> "SelectConfig":
        g, s, r = self.generate, self.score, self.route
        if g.samples < 1:
            raise ValueError(f"generate.samples must be >= 1, got {g.samples}")
        if g.temperature <= 0:
            raise ValueError(f"generate.temperature must be > 0, got {g.temperature}")
        if g.generator not in GENERATORS:
            raise ValueError(f"generate.generator must be one of {list(GENERATORS)}, got {g.generator!r}")
        if not 0.0 < g.top_p <= 1.0:
            raise ValueError(f"generate.top_p must lie in (0, 1], got {g.top_p}")
        if g.max_new_tokens < 1:
            raise ValueError(f"generate.max_new_tokens must be >= 1, got {g.max_new_tokens}")
        if g.actor_cpus < 0 or g.actor_gpus < 0:
            raise ValueError(f"generate.actor_cpus and generate.actor_gpus must be >= 0, got {g.actor_cpus}, {g.actor_gpus}")
        if self.shard_size < 1:
            raise ValueError(f"shard_size must be >= 1, got {self.shard_size}")
        unknown = [x for x in s.signals if x not in SIGNALS]
        if unknown:
            raise ValueError(f"score.signals: unknown {unknown}; known: {list(SIGNALS)}")
        if s.aggregation not in AGGREGATIONS:
            raise ValueError(f"score.aggregation must be one of {list(AGGREGATIONS)}, got {s.aggregation!r}")
        if r.selector not in SELECTORS:
            raise ValueError(f"route.selector must be one of {list(SELECTORS)}, got {r.selector!r}")
        if r.signal == RANDOM:
            if r.selector == "triage" or r.calibrate_sign:
                raise ValueError("route.signal=random has no scores to calibrate: use it with the ratio or interval selector "
                                 "and calibrate_sign false")
        elif r.signal not in s.signals:
            raise ValueError(f"route.signal {r.signal!r} is not among score.signals {list(s.signals)} "
                             f"(or {RANDOM!r}, a seeded random order)")
        if r.interval not in (*INTERVALS, "custom"):
            raise ValueError(f"route.interval must be one of {[*INTERVALS, 'custom']}, got {r.interval!r}")
        if r.interval == "custom" and (r.low is None or r.high is None):
            raise ValueError("route.interval=custom needs route.low and route.high")
        if r.selector == "interval" and "accuracy" not in s.signals:
            raise ValueError("route.selector=interval needs the accuracy signal (labels) in score.signals")
        for name in ("rho_annotate", "rho_discard"):
            v = getattr(r, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"route.{name} must lie in [0, 1], got {v}")
        if r.rho_annotate + r.rho_discard > 1.0 + 1e-12:
            raise ValueError(f"route.rho_annotate + route.rho_discard must be <= 1, got {r.rho_annotate + r.rho_discard}")
        if not 0.0 <= r.probe_fraction <= 1.0 or r.min_probes < 1:
            raise ValueError(f"route.probe_fraction must lie in [0, 1] and route.min_probes be >= 1, got "
                             f"{r.probe_fraction}, {r.min_probes}")
        return self

    def section(self, *names: str) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {n: d[n] for n in names}

    def generate_identity(self) -> dict[str, Any]:
        """The generate settings that decide the samples (what a stage folder is checked against)."""
        g = dataclasses.asdict(self.generate)
        for k in RESOURCE_KEYS:
            g.pop(k)
        for k, v in IDENTITY_DEFAULTS.items():
            if g[k] == v:
                g.pop(k)
        return {"generate": g}


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=list).encode()).hexdigest()[:16]


def _build(cls, data: dict[str, Any], where: str):
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; known: {sorted(names)}")
    kwargs = {}
    for k, v in data.items():
        sub = {"generate": GenerateConfig, "score": ScoreConfig, "route": RouteConfig,
               "materialize": MaterializeConfig}.get(k) if cls is SelectConfig else None
        if sub is not None:
            if not isinstance(v, dict):
                raise ValueError(f"{where}.{k}: expected a mapping, got {type(v).__name__}")
            v = _build(sub, v, f"{where}.{k}")
        elif k == "signals":
            v = tuple([v] if isinstance(v, str) else v)
        kwargs[k] = v
    return cls(**kwargs)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> SelectConfig:
    """A :class:`SelectConfig` from a YAML/JSON file (missing keys take the defaults) plus dotted
    ``overrides`` (``{"generate.samples": 4}``)."""
    data: dict[str, Any] = {}
    if path is not None:
        import yaml

        text = Path(path).read_text(encoding="utf-8")
        loaded = yaml.safe_load(text)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping of config keys, got {type(loaded).__name__}")
        data = loaded
    for dotted, v in (overrides or {}).items():
        d = data
        parts = dotted.split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = v
    return _build(SelectConfig, data, str(path or "config")).validate()


def interval_bounds(cfg: RouteConfig) -> tuple[float, float, bool, bool]:
    """(low, high, low inclusive, high inclusive) of the pass-rate interval."""
    if cfg.interval == "custom":
        return float(cfg.low), float(cfg.high), True, True  # type: ignore[arg-type]
    return INTERVALS[cfg.interval]
