"""The generation component's guarantee: sample j of the prompt keyed k depends only on (seed, k, j), not on
the batch it is in, the batch size or its position; and the per-row sampler is exact."""

import pytest

torch = pytest.importorskip("torch")

from devenus.generate import BACKENDS, Sample, Sampling, make_backend, row_seed  # noqa: E402
from devenus.generate.sampler import RowSampler  # noqa: E402


def test_a_row_draws_the_same_from_the_same_logits_whatever_its_batch():
    torch.manual_seed(0)
    logits = torch.randn(5, 40) * 2
    seeds = [row_seed(3, f"q{i}", 0) for i in range(5)]
    together = RowSampler(seeds, 0.9, 0.95, 20).perturb(logits)
    alone = RowSampler([seeds[3]], 0.9, 0.95, 20).perturb(logits[3:4])
    reordered = RowSampler(seeds[::-1], 0.9, 0.95, 20).perturb(logits.flip(0))
    assert torch.equal(together[3], alone[0]) and torch.equal(together, reordered.flip(0))
    # and it must fail where it should: another seed, another draw
    assert not torch.equal(RowSampler([seeds[2]], 0.9, 0.95, 20).perturb(logits[3:4]), alone)


def test_the_row_seed_is_a_function_of_seed_key_and_index_only():
    assert row_seed(0, "a", 1) == row_seed(0, "a", 1)
    assert len({row_seed(0, "a", 1), row_seed(1, "a", 1), row_seed(0, "b", 1), row_seed(0, "a", 2)}) == 4
    assert 0 <= row_seed(7, "k", 3) < 2**63


def test_gumbel_max_draws_follow_the_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 0.5]])
    n = 4000
    picks = RowSampler(list(range(n)), temperature=0.8)(None, logits.expand(n, -1)).argmax(-1)
    freq = torch.bincount(picks, minlength=5).double() / n
    probs = torch.softmax(logits[0].double() / 0.8, -1)
    sigma = (probs * (1 - probs) / n).sqrt()
    assert ((freq - probs).abs() <= 4 * sigma + 1e-9).all(), (freq, probs)


def test_top_p_draws_from_the_renormalised_nucleus():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    p = torch.softmax(logits[0], -1).numpy()  # 0.64, 0.24, 0.09, 0.03
    assert torch.isfinite(RowSampler([0], 1.0, 0.7).warp(logits))[0].tolist() == [True, True, False, False]
    assert torch.isfinite(RowSampler([0], 1.0, 0.5).warp(logits))[0].tolist() == [True, False, False, False]
    n = 20000
    picks = RowSampler(list(range(n)), 1.0, top_p=0.7)(None, logits.expand(n, -1)).argmax(-1)
    freq = (torch.bincount(picks, minlength=4).double() / n).numpy()
    want = [p[0] / (p[0] + p[1]), p[1] / (p[0] + p[1]), 0, 0]
    assert freq[2:].sum() == 0 and abs(freq - want).max() < 0.015


def test_warping_matches_transformers():
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    scores = torch.randn(6, 50) * 3
    for t, p, k in [(1.0, 1.0, -1), (0.7, 0.9, -1), (1.3, 1.0, 5), (0.5, 0.5, 10), (1.0, 0.99, 49)]:
        ref = TemperatureLogitsWarper(t)(None, scores.clone()) if t != 1.0 else scores.clone()
        if k > 0:
            ref = TopKLogitsWarper(k)(None, ref)
        if p < 1.0:
            ref = TopPLogitsWarper(p)(None, ref)
        ours = RowSampler([0] * 6, t, p, k).warp(scores.clone())
        assert torch.equal(torch.isinf(ours), torch.isinf(ref))
        assert torch.allclose(ours[~torch.isinf(ours)].float(), ref[~torch.isinf(ref)])


@pytest.fixture(scope="module")
def backend(base_testbed):
    return make_backend("hf", model=base_testbed.load_model(), batch_size=64)


def _q(i):
    return [{"role": "user", "content": f"What is {i} + {2 * i + 1}?"}]


def test_a_sample_is_the_same_alone_or_in_a_batch_at_another_position(backend):
    s = Sampling(temperature=1.0, max_new_tokens=48, seed=5)
    alone = backend.generate([_q(7)], ["k7"], 3, s)[0]
    others = [_q(i) for i in range(20, 29)]
    mixed = backend.generate(others[:4] + [_q(7)] + others[4:], [f"o{i}" for i in range(4)] + ["k7"]
                             + [f"o{i}" for i in range(4, 9)], 3, s)
    small = make_backend("hf", model=(backend.model, backend.tokenizer), batch_size=2)
    assert mixed[4] == alone == small.generate([_q(7)] + others[:2], ["k7", "a", "b"], 3, s)[0]
    assert all(isinstance(x, Sample) and x.response_ids for x in alone)
    assert len({tuple(x.response_ids) for x in alone}) > 1  # the three samples differ (another index)
    # the key, not the prompt's position or text, chooses the draw: another key, other samples
    assert backend.generate([_q(7)], ["other"], 3, s)[0] != alone
    assert backend.generate([_q(7)], ["k7"], 3, Sampling(temperature=1.0, max_new_tokens=48, seed=6))[0] != alone


def test_truncated_samples_have_no_eos(backend):
    for s in backend.generate([[{"role": "user", "content": "Compute 123456 + 654321."}]], ["t"], 2,
                              Sampling(max_new_tokens=3))[0]:
        assert s.truncated and len(s.response_ids) == 3 and backend.tokenizer.eos_token_id not in s.response_ids


def test_backends_are_registered_once_and_unknown_names_are_one_line():
    assert BACKENDS.names() == ["hf", "vllm"]
    with pytest.raises(ValueError, match=r"unknown generation backend 'vlm' \(did you mean 'vllm'\?\)"):
        make_backend("vlm", "/nowhere")
