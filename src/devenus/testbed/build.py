"""Build (or reuse) the CPU testbed: task splits as record-contract Parquet, tokenizer, base model.

One call builds everything deterministically from a seed and caches it under a key derived from the
config, so the demo, the tests and CI pay for it once per machine. A build happens in a temporary
folder that is renamed into place only when complete (a crash never leaves a half-built testbed), and
a file lock makes concurrent builders wait for one another instead of racing.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from devenus.config import Config, option
from devenus.testbed import tasks
from devenus.testbed.model import ModelConfig
from devenus.testbed.sft import SFTConfig
from devenus.testbed.shipped import SHIPPED_BASE_MODELS, check_hash, install, model_hash

# Bump when a change to the generators, tokenizer or training code changes what a config builds.
BUILD_VERSION = 1

SPLIT_FILES = ("train", "train_paraphrase", "dev_id", "test_id", "test_ood")


@dataclass(frozen=True)
class SplitSizes:
    train: int = 2000  # RL pool (ID family), all labeled with gold targets
    dev_id: int = 128  # SFT stopping rule only
    test_id: int = 256  # held out: reported, never tuned on
    test_ood_per_family: int = 128
    sft_id: int = 6000
    sft_ood_per_family: int = 1500


@dataclass(frozen=True)
class TestbedConfig(Config):
    """The testbed's config. ``answer_style`` picks the worked solutions the SFT data writes (``line``: the
    default testbed; ``steps``: :data:`STEPS`, worked steps with a self-check and occasional
    self-corrections, :func:`tasks.styled`). From a mapping: ``config_from_dict(TestbedConfig, {...})``."""

    __test__ = False  # not a pytest class
    key_path: ClassVar[str] = "testbed"

    seed: int = 0
    answer_style: str = option("line", "worked solutions of the SFT data: line (one line per column) or steps "
                                       "(steps, a self-check, occasional self-corrections)",
                               choices=tasks.ANSWER_STYLES)
    vocab_size: int = 384
    model: ModelConfig = field(default_factory=ModelConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    sizes: SplitSizes = field(default_factory=SplitSizes)
    train_difficulties: tuple[int, ...] = (2, 3, 4)
    sft_id_difficulties: tuple[int, ...] = (1, 2, 3, 4)
    mid_difficulty: int = 3  # "ID mid": the split the base model's pass@1 is judged on
    ood_difficulties: dict = field(default_factory=lambda: {"count": (3, 4, 5, 6, 7, 8), "max": (2, 3, 4, 5)})
    max_new_tokens: int = 96
    dev_samples: int = 2  # samples per dev question in the stopping rule
    report_samples: int = 4  # avg@k on the test splits in the build report

    @property
    def ood_families(self) -> tuple[str, ...]:
        return tuple(self.ood_difficulties)

    def key(self) -> str:  # type: ignore[override]  # the cache key (Config.key names a config key)
        cfg = dataclasses.asdict(self)
        blob = {"v": BUILD_VERSION, "cfg": cfg}
        if cfg["answer_style"] == "line":  # the default style keeps the key it had before the field existed
            del cfg["answer_style"]
        else:
            blob["steps_v"] = tasks.STEPS_VERSION
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=list).encode()).hexdigest()[:12]


#: The testbed whose answers have steps (docs/testbed.md, "Stepped answers"): SFT on worked solutions
#: with a self-check line and 15% self-corrections; ``add_long`` (5 digits) in the SFT data and the OOD
#: split but never in the RL pool (d in {2, 3, 4}), so RL can move it either way; 144 tokens of answer (a 6-digit sum takes ~135).
STEPS = TestbedConfig(answer_style="steps", max_new_tokens=144,
                      ood_difficulties={"count": (3, 4, 5, 6, 7, 8), "max": (2, 3, 4, 5), "add_long": (5,)})


@dataclass(frozen=True)
class Testbed:
    """Paths of a built testbed. ``model_dir`` holds the HF model and its tokenizer (what verl loads)."""

    __test__ = False

    root: Path
    config: TestbedConfig

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    def split(self, name: str) -> Path:
        if name not in SPLIT_FILES:
            raise KeyError(f"unknown testbed split {name!r}; known: {SPLIT_FILES}")
        return self.root / "data" / f"{name}.parquet"

    @property
    def report(self) -> dict:
        return json.loads((self.root / "report.json").read_text())

    def load_model(self):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return AutoModelForCausalLM.from_pretrained(self.model_dir), AutoTokenizer.from_pretrained(self.model_dir)


def default_cache_dir() -> Path:
    env = os.environ.get("DEVENUS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "devenus"


# ------------------------------------------------------------------------------------------ splits
def question_sets(cfg: TestbedConfig) -> dict[str, list[tasks.Question]]:
    """All question sets, drawn in a fixed order with held-out keys excluded from everything after them."""
    s, seed, used = cfg.sizes, cfg.seed, set()

    def draw(family, diffs, n, tag):
        qs = tasks.generate(family, tuple(diffs), n, seed=f"{seed}:{tag}", exclude=used)  # type: ignore[arg-type]
        used.update(q.key for q in qs)
        return qs

    out = {
        "test_id": draw("add", (cfg.mid_difficulty,), s.test_id, "test"),
        "test_ood": [q for fam in cfg.ood_families for q in draw(fam, cfg.ood_difficulties[fam], s.test_ood_per_family, "test")],
        "dev_id": draw("add", (cfg.mid_difficulty,), s.dev_id, "dev"),
        "train": draw("add", cfg.train_difficulties, s.train, "train"),
    }
    out["sft"] = draw("add", cfg.sft_id_difficulties, s.sft_id, "sft") + [
        q for fam in cfg.ood_families for q in draw(fam, cfg.ood_difficulties[fam], s.sft_ood_per_family, "sft")
    ]
    return out


def question_rows(questions: list[tasks.Question], split: str, view: str = "original") -> list[dict]:
    """Record-contract rows for testbed questions: gold labels, hidden truth kept in ``simulation``."""
    from devenus.records import make_row, validate_rows

    rows = []
    for i, q in enumerate(questions):
        base = f"testbed/{split}/{q.family}/{i:05d}"
        rows.append(
            make_row(
                data_source=f"testbed/{q.family}",
                index=base if view == "original" else f"{base}#{view}",
                source="testbed",
                split=split,
                question=q.text(view),
                ground_truth=q.answer,
                labeled=True,
                label_source="gold",
                extra={"difficulty": q.difficulty, "family": q.family, "view": view, "pair_key": base},
                simulation={"hidden_answer": q.answer, "noise": "none"},
                validate=False,
            )
        )
    validate_rows(rows)  # (all at once: one table)
    return rows


# ------------------------------------------------------------------------------------------ build
def build_testbed(
    config: TestbedConfig | None = None,
    cache_dir: str | Path | None = None,
    force: bool = False,
    log: Callable[[str], None] = print,
    rebuild: bool = False,
) -> Testbed:
    """Return the testbed for ``config``, building it first if the cache does not hold it.

    A key with shipped base weights (``shipped.SHIPPED_BASE_MODELS``: the default config) installs them
    instead of training SFT, and every call checks the cached model's content hash against them.
    ``rebuild=True`` runs the SFT recipe from scratch into ``rebuild-<key>/`` beside it (always anew),
    leaving the testbed itself untouched: a check of the recipe, not a second base model."""
    from devenus.atomic import atomic_dir

    cfg = config or TestbedConfig()
    root = Path(cache_dir or default_cache_dir()) / "testbed"
    root.mkdir(parents=True, exist_ok=True)
    shipped = None if rebuild else SHIPPED_BASE_MODELS.get(cfg.key())
    final = root / f"{'rebuild' if rebuild else 'tb'}-{cfg.key()}"
    with open(root / f".lock-{cfg.key()}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds the cache filled
        if final.exists() and not (force or rebuild):
            if shipped:
                check_hash(final / "model", shipped, "testbed")  # e.g. one SFT-trained before weights shipped
            return Testbed(final, cfg)
        with atomic_dir(final) as tmp:
            _build_into(tmp, cfg, log, train=shipped is None)
    return Testbed(final, cfg)


def _build_into(out: Path, cfg: TestbedConfig, log: Callable[[str], None], train: bool = True) -> None:
    """Splits, then the base model: trained by SFT (``train``) or installed from the shipped weights."""
    from devenus.records import write_records

    t0 = time.perf_counter()
    qs = question_sets(cfg)
    (out / "data").mkdir(parents=True)
    for split in ("train", "dev_id", "test_id", "test_ood"):
        write_records(question_rows(qs[split], split), out / "data" / f"{split}.parquet")
    write_records(question_rows(qs["train"], "train", view="paraphrase"), out / "data" / "train_paraphrase.parquet")
    if train:
        sft, base_accuracy = _train_base(out, cfg, qs, log)
        base = {"hash": model_hash(out / "model"), "source": "sft"}
    else:
        rec = install(cfg.key(), qs, out / "model", cfg.answer_style)
        log(f"[testbed] base model = shipped weights {rec['base_model']} (SFT step {rec['sft']['chosen_step']}, "
            f"built on {rec['built_on'].split(',')[0]}); no SFT run")
        # the accuracies are those the weights' own build measured; `--rebuild` re-measures the recipe
        sft, base_accuracy = rec["sft"], rec["base_accuracy"]
        base = {"hash": rec["base_model"], "source": "shipped", "built_on": rec["built_on"]}
    report = {"config_key": cfg.key(), "config": dataclasses.asdict(cfg), "sft": sft, "base_accuracy": base_accuracy,
              "base_model": base, "build_seconds": round(time.perf_counter() - t0, 1)}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=list))


def _train_base(out: Path, cfg: TestbedConfig, qs: dict, log: Callable[[str], None]) -> tuple[dict, dict]:
    """The SFT recipe: tokenizer from the SFT corpus, the tiny model, SFT stopped by dev accuracy; returns the
    SFT record (chosen step, its dev accuracy, the curve) and the base model's held-out accuracy."""
    import torch

    from devenus.testbed.evaluate import accuracy
    from devenus.testbed.model import build_model
    from devenus.testbed.sft import train_sft
    from devenus.testbed.tokenizer import build_tokenizer

    torch.set_num_threads(1)
    sft_pool = [tasks.styled(q, cfg.answer_style) for q in qs["sft"]]
    corpus = [q.text(v) + "\n" + q.solution(v) for q in sft_pool for v in tasks.VIEWS]
    corpus += ["<|im_start|>user\n", "<|im_start|>assistant\n"]
    tok = build_tokenizer(corpus, cfg.vocab_size)
    model = build_model(cfg.model, tok, cfg.seed)
    log(f"[testbed] {sum(p.numel() for p in model.parameters())/1e6:.2f}M parameters, vocab {len(tok)} "
        f"(logits {model.config.vocab_size}); SFT on {len(qs['sft'])} questions")

    dev_q = [q.text() for q in qs["dev_id"]]
    dev_a = [q.answer for q in qs["dev_id"]]

    def dev_accuracy(m) -> float:
        return accuracy(m, tok, dev_q, dev_a, cfg.dev_samples, 1.0, cfg.max_new_tokens, seed=cfg.seed).mean

    def progress(p: dict) -> None:
        log(f"[testbed] SFT step {p['step']:4d}  loss {p['loss']:.3f}  dev pass@1 {p['dev_acc']:.3f}  ({p['elapsed_s']:.0f}s)")

    res = train_sft(model, tok, sft_pool, cfg.sft, cfg.seed, dev_accuracy, progress)
    model.load_state_dict(res.state_dict)
    log(f"[testbed] base model = SFT step {res.step} (dev sampled pass@1 {res.dev_acc:.3f})")
    model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    return {"chosen_step": res.step, "dev_acc": res.dev_acc, "curve": res.curve}, evaluate_splits(model, tok, qs, cfg)


def evaluate_splits(model, tok, qs: dict, cfg: TestbedConfig) -> dict:
    """Sampled (T=1, avg@k) and greedy accuracy on the held-out splits, by split and family."""
    from devenus.testbed.evaluate import accuracy, summarize

    groups = {"ID": qs["test_id"]} | {f"OOD/{f}": [q for q in qs["test_ood"] if q.family == f] for f in cfg.ood_families}
    per_q: dict[str, dict[str, tuple]] = {}
    for name, group in groups.items():
        qtext, ans = [q.text() for q in group], [q.answer for q in group]
        per_q[name] = {
            "sampled": accuracy(model, tok, qtext, ans, cfg.report_samples, 1.0, cfg.max_new_tokens, seed=cfg.seed + 1).per_question,
            "greedy": accuracy(model, tok, qtext, ans, 1, 0.0, cfg.max_new_tokens).per_question,
        }
    per_q["OOD"] = {m: sum((per_q[f"OOD/{f}"][m] for f in cfg.ood_families), ()) for m in ("sampled", "greedy")}
    table = {}
    for name, d in per_q.items():
        s, g = summarize(d["sampled"], cfg.report_samples), summarize(d["greedy"], 1)
        table[name] = {
            "n": s.n_questions,
            "sampled": {"mean": s.mean, "ci95": s.ci95, "k": cfg.report_samples},
            "greedy": {"mean": g.mean, "ci95": g.ci95},
        }
    return table
