"""The generation backends on real models: the HF backend on the testbed's model; vLLM where it can run
(never so far: no GPU in this project's sessions)."""

import importlib.util

import pytest

from devenus.generate import Sampling, make_backend
from devenus.generate.hf import HFBackend

PROMPTS = [({"role": "user", "content": "Compute 123 + 456."},), ({"role": "user", "content": "Compute 805 + 77."},),
           ({"role": "user", "content": "Which is the largest: 27, 82, 18?"},)]
KEYS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def hf(base_testbed):
    return HFBackend(str(base_testbed.model_dir), batch_size=4)


def test_hf_prompt_is_the_chat_template_verl_applies(hf):
    text = hf.tokenizer.decode(hf.prompt_ids(PROMPTS[0]))
    assert text == "<|im_start|>user\nCompute 123 + 456.<|im_end|>\n<|im_start|>assistant\n"


def test_hf_sampling_is_seeded(hf):
    s = Sampling(1.0, 1.0, 48, seed=0)
    a = hf.generate(PROMPTS, KEYS, 3, s)
    assert [len(c) for c in a] == [3, 3, 3]
    assert a == hf.generate(PROMPTS, KEYS, 3, s)  # a rerun reproduces every sample
    b = hf.generate(PROMPTS, KEYS, 3, Sampling(1.0, 1.0, 48, seed=1))
    assert a != b
    assert any("\\boxed{" in c.text for group in a for c in group)  # the model answers in the trained format


def test_hf_greedy_and_truncation(hf):
    g = hf.generate(PROMPTS[:2], KEYS[:2], 2, Sampling(0.0, 1.0, 48))
    assert all(group[0] == group[1] for group in g)  # T=0: greedy, both samples the same
    short = hf.generate(PROMPTS[:2], KEYS[:2], 1, Sampling(1.0, 1.0, 2))
    assert all(c.truncated for group in short for c in group)  # 2 tokens cannot reach EOS


def test_hf_progress_counts_every_prompt(hf):
    seen = []
    hf.generate(PROMPTS, KEYS, 3, Sampling(1.0, 1.0, 8), progress=seen.append)  # 9 sequences in batches of 4
    assert sum(seen) == len(PROMPTS)


def test_auto_picks_hf_without_a_gpu(base_testbed):
    import torch

    if torch.cuda.is_available() and importlib.util.find_spec("vllm"):
        pytest.skip("a GPU and vllm are present: auto picks vllm")
    assert make_backend("auto", str(base_testbed.model_dir)).name == "hf"
    with pytest.raises(ValueError, match="unknown generation backend"):
        make_backend("tpu", str(base_testbed.model_dir))


def _vllm_runs() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (it runs on GPU machines only)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device for vllm"
    return None


@pytest.mark.skipif(_vllm_runs() is not None, reason=_vllm_runs() or "")
def test_vllm_backend_on_the_testbed_model(base_testbed):
    from devenus.generate.vllm import VLLMBackend

    v = VLLMBackend(str(base_testbed.model_dir), max_model_len=256, gpu_memory_utilization=0.3)
    s = Sampling(1.0, 1.0, 64, seed=0)
    a = v.generate(PROMPTS, KEYS, 4, s)
    assert [len(c) for c in a] == [4, 4, 4]
    assert a == v.generate(PROMPTS, KEYS, 4, s)
    assert any("\\boxed{" in c.text for group in a for c in group)


def test_hf_progress_is_per_question_inside_one_batch(base_testbed):
    # one batch holds all 9 sequences: the count still moves as each question's samples end, not once at
    # the end of the batch (a 256-sequence batch takes minutes on a CPU)
    hf = HFBackend(str(base_testbed.model_dir), batch_size=64)
    seen = []
    out = hf.generate(PROMPTS, KEYS, 3, Sampling(0.0, 1.0, 48), progress=seen.append)
    assert sum(seen) == len(PROMPTS)
    lengths = {len(hf.tokenizer(g[0].text)["input_ids"]) for g in out}
    assert len(lengths) > 1  # greedy answers of different lengths: they end at different steps
    assert len([x for x in seen if x]) > 1 and seen[-1] == 0  # counted as they ended; the batch's end adds none
