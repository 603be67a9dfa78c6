"""The vLLM generation backend in the generate stage: lazy import, the install hint, the conversion of vLLM's
outputs into our rows, one seeded request per question (checked with a stand-in engine), and, where vLLM and
a GPU are there, the testbed model through the real engine (schema and reruns; never run so far: no GPU in
this project's sessions)."""

from __future__ import annotations

import random
import subprocess
import sys
import types
from dataclasses import dataclass, field

import pyarrow.parquet as pq
import pytest

from devenus.generate import Sample, Sampling
from devenus.generate.vllm import INSTALL_HINT, VLLMBackend, VLLMUnavailable, request_seed, to_samples
from devenus.select.stages.generate import StageGenerator

EOS = 2


# ------------------------------------------------------------------ vLLM-shaped plain objects
@dataclass
class Completion:  # vllm.CompletionOutput's fields that we read
    index: int
    token_ids: list
    text: str
    finish_reason: str | None


@dataclass
class RequestOutput:  # vllm.RequestOutput's
    request_id: str
    outputs: list = field(default_factory=list)


def test_importing_selection_never_imports_vllm():
    code = ("import sys, devenus.select, devenus.select.stages.generate, devenus.generate, devenus.generate.vllm, "
            "devenus.select.stages, devenus.select.stages.sharded, devenus.select.cli; "
            "from devenus.select.config import load_config; load_config(None, {'generate.generator': 'vllm'}); "
            "print('vllm' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_missing_vllm_is_one_line_with_the_install_hint(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail, installed or not
    with pytest.raises(VLLMUnavailable, match=r"pip install 'devenus\[vllm\]'") as e:
        VLLMBackend("some/model")
    assert isinstance(e.value, ImportError) and isinstance(e.value, ValueError) and "\n" not in str(e.value)
    assert INSTALL_HINT in str(e.value)
    # the command line: an `error:` line and exit 1, before any pool is read (the pool does not exist)
    code = ("import sys; sys.modules['vllm'] = None; from devenus.cli import main; "
            f"sys.exit(main(['select', 'generate', '--set', 'generate.generator=vllm', '--set', "
            f"'pool={tmp_path / 'nowhere.parquet'}', '--out', '{tmp_path / 'run'}', '--no-progress']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "pip install 'devenus[vllm]'" in lines[0]


def test_vllm_is_an_optional_extra_only():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python >= 3.11")
    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert [r for r in project["optional-dependencies"]["vllm"] if r.startswith("vllm")]  # the hint's extra exists
    assert not [r for r in project["dependencies"] if r.lower().startswith("vllm")]
    lock = (root / "requirements" / "lock.txt").read_text().lower().splitlines()
    assert not [x for x in lock if x.startswith("vllm")]


def test_unknown_generator_is_a_config_error():
    from devenus.select.config import load_config

    with pytest.raises(ValueError, match=r"generate.generator: unknown generation backend .tgi.; the generation backends: hf, vllm"):
        load_config(None, {"generate.generator": "tgi"})
    with pytest.raises(ValueError, match="top_p"):
        load_config(None, {"generate.top_p": 0.0})


def test_request_output_becomes_our_rows_truncation_included():
    out = RequestOutput("7", [
        Completion(2, (5, 6, 7), "len", "length"),  # hit max tokens: no answer
        Completion(0, [5, EOS], "a", "stop"),  # EOS kept in token_ids
        Completion(1, [9], "b", "stop"),  # an EOS stop a build left out: appended
    ])
    got = to_samples(out, 3, [EOS], decode=lambda ids: "|".join(map(str, ids)))
    assert got == [Sample([5, EOS], "5|2", False), Sample([9, EOS], "9|2", False), Sample([5, 6, 7], "5|6|7", True)]
    assert [s.text for s in to_samples(out, 3, [EOS])] == ["a", "b", "len"]  # vLLM's own text without a decoder
    with pytest.raises(ValueError, match="expected 0..3"):
        to_samples(out, 4, [EOS])
    with pytest.raises(ValueError, match="unexpected finish_reason None"):
        to_samples(RequestOutput("8", [Completion(0, [1], "x", None)]), 1, [EOS])


# ------------------------------------------------------------------ a stand-in engine
class FakeTokenizer:
    eos_token_id = EOS
    chat_template = "<role>content ... <assistant>"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def __call__(self, text):
        return {"input_ids": [10 + ord(c) % 50 for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids if not (skip_special_tokens and i == EOS))


@dataclass
class FakeParams:
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int


class FakeLLM:
    """Draws from the request's own seed only, as vLLM's per-request generator does."""

    def __init__(self):
        self.calls = []

    def generate(self, requests, params, use_tqdm=True):
        self.calls.append((requests, params))
        outs = []
        for k, (req, p) in enumerate(zip(requests, params)):
            rng = random.Random(p.seed * 31 + len(req["prompt_token_ids"]))
            comps = []
            for j in range(p.n):
                n = rng.randint(1, p.max_tokens + 2)
                ids = [rng.randint(3, 60) for _ in range(min(n, p.max_tokens))]
                done = n <= p.max_tokens
                comps.append(Completion(j, ids + [EOS] if done else ids, "", "stop" if done else "length"))
            outs.append(RequestOutput(str(k), comps[::-1]))
        return outs


def vllm_stage(model_dir, *, samples, temperature=1.0, top_p=1.0, max_new_tokens=96, seed=0, **kw):
    """The generate stage's generator on the vllm backend."""
    return StageGenerator(VLLMBackend(model_dir, seed=seed, **kw), samples,
                          Sampling(temperature, top_p, max_new_tokens, seed))


@pytest.fixture
def fake_vllm(monkeypatch):
    mod = types.ModuleType("vllm")
    mod.SamplingParams = FakeParams
    mod.LLM = None
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return mod


PROMPTS = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(5)]
KEYS = [f"pool/{i}" for i in range(5)]


def test_one_seeded_request_per_question_with_the_configured_sampling(fake_vllm):
    llm = FakeLLM()
    gen = vllm_stage("m", samples=4, temperature=0.7, top_p=0.9, max_new_tokens=6, seed=3, llm=llm,
                        tokenizer=FakeTokenizer())
    together = gen.generate(PROMPTS, KEYS)
    requests, params = llm.calls[0]
    assert len(requests) == 5 and len(llm.calls) == 1
    assert requests[0]["prompt_token_ids"] == FakeTokenizer()(FakeTokenizer().apply_chat_template(PROMPTS[0]))["input_ids"]
    assert params[0] == FakeParams(n=4, temperature=0.7, top_p=0.9, max_tokens=6, seed=request_seed(3, KEYS[0]))
    assert len({p.seed for p in params}) == 5
    # a question's samples depend on its key and the seed, not on the batch it is in
    apart = gen.generate(PROMPTS[3:], KEYS[3:]) + gen.generate(PROMPTS[:3], KEYS[:3])
    assert apart[2:] + apart[:2] == together
    assert all(len(ss) == 4 for ss in together)
    flat = [s for ss in together for s in ss]
    assert any(s.truncated for s in flat) and any(not s.truncated for s in flat)
    for s in flat:
        assert s.truncated == (s.response_ids[-1:] != [EOS]) and (not s.truncated or len(s.response_ids) == 6)
        assert s.text == FakeTokenizer().decode(s.response_ids)
    other = vllm_stage("m", samples=4, seed=4, llm=FakeLLM(), tokenizer=FakeTokenizer())
    assert other.generate(PROMPTS, KEYS) != together


def test_the_generate_stage_writes_the_same_table_for_either_generator(fake_vllm, tmp_path):
    from devenus.select.config import load_config
    from devenus.select.stages.generate import generate_shard

    class Fixed:  # the HF generator's output shape, without a model
        def generate(self, prompts, keys):
            return [[Sample([4, EOS], "4", False), Sample([5, 6], "5 6", True)] for _ in prompts]

    cfg = load_config(None, {"generate.samples": 2, "generate.generator": "vllm"})
    rows = [{"prompt": p, "extra_info": {"index": k}} for p, k in zip(PROMPTS, KEYS)]
    gen = vllm_stage("m", samples=2, max_new_tokens=4, llm=FakeLLM(), tokenizer=FakeTokenizer())
    generate_shard(gen, rows, tmp_path / "v.parquet")
    generate_shard(Fixed(), rows, tmp_path / "h.parquet")
    v, h = pq.read_table(tmp_path / "v.parquet"), pq.read_table(tmp_path / "h.parquet")
    assert v.schema == h.schema and v.column("index").to_pylist() == h.column("index").to_pylist()
    assert v.column("n_tokens").to_pylist() == [len(x) for x in v.column("response_ids").to_pylist()]


def test_vllm_is_chosen_from_the_config_and_ray_actors_get_gpus(fake_vllm, monkeypatch, tmp_path):
    import devenus.select.stages.sharded as rd
    from devenus.select.config import load_config
    from devenus.select.run import SelectionRun
    from devenus.select.stages.generate import make_generator, run_generate

    cfg = load_config(None, {"generate.generator": "vllm", "generate.model": "/models/x", "generate.top_p": 0.5,
                             "generate.actor_gpus": 1, "generate.max_new_tokens": 7})
    gen = make_generator(cfg)
    assert isinstance(gen.backend, VLLMBackend) and gen.backend.model_dir == "/models/x"
    assert gen.sampling.top_p == 0.5 and gen.sampling.max_new_tokens == 7
    # the stage identity: vllm and top_p count, the GPU share does not
    base = load_config(None, {}).generate_identity()["generate"]
    assert "generator" not in base and "top_p" not in base and "actor_gpus" not in base
    ident = cfg.generate_identity()["generate"]
    assert ident["generator"] == "vllm" and ident["top_p"] == 0.5 and "actor_gpus" not in ident
    seen = {}

    def run_shards(cfg, stage_name, shards, actors, num_cpus=1.0, num_gpus=0.0):
        seen.update(stage=stage_name, actors=actors, num_gpus=num_gpus, num_cpus=num_cpus)
        return iter(())

    monkeypatch.setattr(rd, "run_shards", run_shards)
    cfg.out = str(tmp_path)
    run = SelectionRun(cfg)
    run.rows, run.pool_identity = [{}], {"pool": "p"}  # one question (an empty pool is refused)
    run_generate(run, actors=2, progress=False)
    assert seen == {"stage": "generate", "actors": 2, "num_gpus": 1, "num_cpus": 1.0}


# ------------------------------------------------------------------ releasing the engine
class Recorder:
    def __init__(self):
        self.events = []

    def __call__(self, event):
        return lambda *a, **k: self.events.append(event)


def _fake_release_api(monkeypatch, fake_vllm, rec: Recorder, tokenizer, llm_shutdown: bool = False):
    """vLLM's release surface, recorded: ``LLM(...)`` (an engine whose engine-core client has ``shutdown``,
    and, with ``llm_shutdown``, an ``LLM.shutdown``), ``vllm.distributed.parallel_state.cleanup_dist_env_and_memory``,
    and ``torch.cuda.empty_cache``."""
    import gc

    import torch

    class RecordedLLM(FakeLLM):
        def __init__(self, model, seed, **engine_kw):
            super().__init__()
            rec.events.append("engine built")
            self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=rec("engine-core shutdown")))
            if llm_shutdown:
                self.shutdown = rec("LLM.shutdown")

        def get_tokenizer(self):
            return tokenizer

        def generate(self, requests, params, use_tqdm=True):
            rec.events.append("generate")
            return super().generate(requests, params, use_tqdm)

        def __del__(self):
            rec.events.append("engine collected")

    fake_vllm.LLM = RecordedLLM
    dist = types.ModuleType("vllm.distributed")
    ps = types.ModuleType("vllm.distributed.parallel_state")
    ps.cleanup_dist_env_and_memory = rec("cleanup_dist_env_and_memory")
    dist.parallel_state = ps
    monkeypatch.setitem(sys.modules, "vllm.distributed", dist)
    monkeypatch.setitem(sys.modules, "vllm.distributed.parallel_state", ps)
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: (rec.events.append("gc.collect"), real_collect(*a))[1])
    monkeypatch.setattr(torch.cuda, "empty_cache", rec("cuda.empty_cache"))


def test_close_shuts_the_engine_down_then_frees_memory(fake_vllm, monkeypatch):
    for llm_shutdown, stop in ((False, "engine-core shutdown"), (True, "LLM.shutdown")):
        rec = Recorder()
        _fake_release_api(monkeypatch, fake_vllm, rec, FakeTokenizer(), llm_shutdown=llm_shutdown)
        gen = vllm_stage("m", samples=2, max_new_tokens=4)
        gen.close()  # no engine yet: nothing to release
        gen.generate(PROMPTS[:1], KEYS[:1])
        gen.close()
        assert rec.events == ["engine built", "generate", stop, "engine collected", "cleanup_dist_env_and_memory",
                              "gc.collect", "cuda.empty_cache"]
        gen.close()  # twice: nothing more
        assert len(rec.events) == 7
    given = FakeLLM()
    gen = vllm_stage("m", samples=2, max_new_tokens=4, llm=given, tokenizer=FakeTokenizer())
    gen.generate(PROMPTS[:1], KEYS[:1])
    gen.close()  # the caller's engine: let go, not shut down
    assert gen.backend._llm is None and len(rec.events) == 7


def test_one_process_run_releases_vllm_before_the_scorer_loads(fake_vllm, monkeypatch, tmp_path, base_testbed):
    """``select run`` with ``--actors 0`` and ``generator: vllm``: the stages in order, the engine shut down
    and its memory freed before the HF scorer is loaded onto the same device."""
    from devenus.select.config import load_config
    from devenus.select.stages import run_all
    from devenus.testbed.pool import build_pool

    build_pool()
    model, tok = base_testbed.load_model()
    rec = Recorder()
    _fake_release_api(monkeypatch, fake_vllm, rec, tok)

    def load_scorer():
        rec.events.append("scorer loaded")
        return model, tok

    cfg = load_config(None, {"limit": 4, "shard_size": 2, "generate.samples": 2, "generate.max_new_tokens": 6,
                             "generate.generator": "vllm", "out": str(tmp_path / "run"),
                             "score.signals": ["consistency", "entropy"], "route.signal": "entropy"})
    run_all(cfg, progress=False, model=load_scorer)
    ev = [e for e in rec.events if e != "gc.collect"]  # gc also runs inside the fake's own collection
    assert ev == ["engine built", "generate", "generate", "engine-core shutdown", "engine collected",
                  "cleanup_dist_env_and_memory", "cuda.empty_cache", "scorer loaded"]
    assert rec.events.index("gc.collect") < rec.events.index("scorer loaded")
    assert (tmp_path / "run" / "selected.parquet").exists()


# ------------------------------------------------------------------ the real engine
def test_testbed_model_through_vllm(tmp_path):
    pytest.importorskip("vllm", reason="vLLM is not installed (the optional extra: pip install 'devenus[vllm]')")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("vLLM is installed but no CUDA GPU is visible")
    from devenus.select.config import load_config
    from devenus.select.run import SelectionRun
    from devenus.select.stages.generate import generate_shard, make_generator

    cfg = load_config(None, {"limit": 6, "generate.generator": "vllm", "generate.samples": 4,
                             "generate.max_new_tokens": 24, "generate.gpu_memory_utilization": 0.3})
    rows = SelectionRun(cfg).rows
    gen = make_generator(cfg)
    prompts, keys = [r["prompt"] for r in rows], [r["extra_info"]["index"] for r in rows]
    first = gen.generate(prompts, keys)
    again = gen.generate(prompts[3:], keys[3:]) + gen.generate(prompts[:3], keys[:3])
    assert again[3:] + again[:3] == first  # seeded per question: reruns and other batchings reproduce
    tok = gen.backend.tokenizer
    eos = tok.eos_token_id
    for ss in first:
        assert len(ss) == 4
        for s in ss:
            assert s.truncated == (eos not in s.response_ids)
            assert s.truncated <= (len(s.response_ids) == 24)
            assert s.text == tok.decode(s.response_ids, skip_special_tokens=True)
    generate_shard(gen, rows, tmp_path / "v.parquet")
    t = pq.read_table(tmp_path / "v.parquet")
    assert t.column_names == ["index", "sample", "response_ids", "response", "truncated", "n_tokens"]
    assert t.num_rows == 24 and t.column("sample").to_pylist()[:4] == [0, 1, 2, 3]
