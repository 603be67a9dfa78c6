"""The all-signals forward (one teacher-forced pass with hooks, head applied in chunks) against an
independent computation on the same model: HF's full logits and ``output_hidden_states``."""

import math

import numpy as np
import pytest
import torch

from devenus.generate import Sampling
from devenus.generate.hf import HFBackend, prompt_text
from devenus.select.stages.generate import StageGenerator
from devenus.select.score import forward_signals
from test_signals_hidden_ref import coe_reference, kinetics_reference


def _gen(model, tok, samples, max_new_tokens, seed):
    return StageGenerator(HFBackend(model=(model, tok)), samples, Sampling(max_new_tokens=max_new_tokens, seed=seed))


@pytest.fixture(scope="module")
def model_tok(base_testbed):
    return base_testbed.load_model()


def test_forward_signals_match_full_logits_and_hidden_states(model_tok):
    model, tok = model_tok
    gen = _gen(model, tok, samples=3, max_new_tokens=40, seed=0)
    prompts = [[{"role": "user", "content": "Compute 12 + 345."}], [{"role": "user", "content": "Compute 7 + 8."}]]
    samples = gen.generate(prompts, ["a", "b"])
    pids, rids = [], []
    for p, ss in zip(prompts, samples):
        for s in ss:
            pids.append(tok(prompt_text(tok, p))["input_ids"])
            rids.append(s.response_ids)
    got = forward_signals(model, pids, rids, batch_size=4, token_chunk=5, vocab_chunk=50)
    model.eval()
    for i, (p, r) in enumerate(zip(pids, rids)):
        ids = torch.tensor([p + r])
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
        z = out.logits[0, len(p) - 1: len(p) + len(r) - 1].double()  # the distributions that chose r
        logp = torch.log_softmax(z, -1)
        ent = float((-(logp.exp() * logp).sum(-1)).mean())
        sc = float((-math.log(z.shape[-1]) - logp.mean(-1)).mean())
        hs = np.stack([h[0, len(p):].double().mean(0).numpy() for h in out.hidden_states])
        coe_r, coe_c = coe_reference(hs)
        assert got["entropy"][i] == pytest.approx(ent, rel=1e-4, abs=1e-5)
        assert got["self_certainty"][i] == pytest.approx(sc, rel=1e-4, abs=1e-5)
        assert got["coe_r"][i] == pytest.approx(coe_r, rel=1e-4, abs=1e-6)
        assert got["coe_c"][i] == pytest.approx(coe_c, rel=1e-4, abs=1e-6)
        kin = kinetics_reference([h[0].double().numpy() for h in out.hidden_states],
                                 np.arange(len(p) + len(r)) >= len(p))
        assert got["cot_kinetics"][i] == pytest.approx(kin, rel=1e-4, abs=1e-6)


def test_pivot_trace_matches_eager_attention_maps(model_tok):
    from devenus.select.score import newline_token_ids, pivot_layer_ids, step_starts_of
    from devenus.signals.attention import pivot_count

    model, tok = model_tok
    gen = _gen(model, tok, samples=4, max_new_tokens=80, seed=1)
    prompts = [[{"role": "user", "content": "Compute 4821 + 9776."}], [{"role": "user", "content": "Compute 35 + 8."}]]
    samples = gen.generate(prompts, ["p", "q"])
    nl = newline_token_ids(tok)
    pids, rids = [], []
    for p, ss in zip(prompts, samples):
        for s in ss:
            pids.append(tok(prompt_text(tok, p))["input_ids"])
            rids.append(s.response_ids)
    steps = [step_starts_of(r, nl) for r in rids]
    window = 6
    got = forward_signals(model, pids, rids, ["pivot_trace"], batch_size=3, step_starts=steps, pivot_window=window,
                          pivot_chunk=7)
    layers = pivot_layer_ids(model.config.num_hidden_layers)
    assert layers == [2, 3]
    model.set_attn_implementation("eager")
    try:
        want = []
        for p, r, st in zip(pids, rids, steps):
            with torch.no_grad():
                att = model(input_ids=torch.tensor([p + r]), output_attentions=True).attentions
            t = len(p) + len(r)
            far = torch.zeros(t)
            for li in layers:
                a = att[li][0].double()  # [H, T, T]
                i = torch.arange(t)[:, None]
                j = torch.arange(t)[None, :]
                far += (a * ((j < i - window) & (j > 0))).sum(-1).mean(0).float() / len(layers)
            want.append(pivot_count(far[len(p):].numpy(), st))
    finally:
        model.set_attn_implementation("sdpa")
    assert got["pivot_trace"].tolist() == want
    assert sum(want) > 0  # the comparison is not between zeros


def test_every_signal_in_bfloat16_comes_back_as_float64_close_to_float32(model_tok):
    """The GPU path's dtype (bf16 weights, activations and attention masses) through the same forward: every
    result leaves the device as float64 numpy (numpy has no bfloat16) and stays near the fp32 value."""
    import copy

    from devenus.select.config import MODEL_SIGNALS
    from devenus.select.score import newline_token_ids, step_starts_of

    model, tok = model_tok
    gen = _gen(model, tok, samples=3, max_new_tokens=40, seed=2)
    prompts = [[{"role": "user", "content": "Compute 123 + 45."}]]
    rids = [s.response_ids for s in gen.generate(prompts, ["c"])[0]]
    pids = [tok(prompt_text(tok, prompts[0]))["input_ids"]] * len(rids)
    steps = [step_starts_of(r, newline_token_ids(tok)) for r in rids]
    kw = dict(batch_size=2, token_chunk=5, vocab_chunk=50, step_starts=steps, pivot_window=6)
    fp32 = forward_signals(model, pids, rids, MODEL_SIGNALS, **kw)
    bf16 = forward_signals(copy.deepcopy(model).to(torch.bfloat16), pids, rids, MODEL_SIGNALS, **kw)
    for name in MODEL_SIGNALS:
        assert bf16[name].dtype == np.float64 and np.isfinite(bf16[name]).all(), name
    for name in ("entropy", "self_certainty"):
        np.testing.assert_allclose(bf16[name], fp32[name], rtol=0.1, atol=0.05, err_msg=name)


def test_pivot_trace_on_a_llama_matches_its_eager_attention_maps():
    """SmolLM2's architecture (Llama: no q/k norms, grouped-query attention, its own rotary function),
    random-initialised at toy size: the Q/K recompute must match Llama's own attention maps."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from devenus.select.score import pivot_layer_ids
    from devenus.signals.attention import pivot_count

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).eval()
    model.set_attn_implementation("sdpa")
    g = torch.Generator().manual_seed(1)
    pids = [torch.randint(3, 300, (n,), generator=g).tolist() for n in (9, 14, 11)]
    rids = [torch.randint(3, 300, (n,), generator=g).tolist() for n in (30, 22, 41)]
    steps = [list(range(0, len(r), 5)) for r in rids]
    window = 3
    got = forward_signals(model, pids, rids, ["pivot_trace"], batch_size=2, step_starts=steps, pivot_window=window,
                          pivot_chunk=7)
    layers = pivot_layer_ids(cfg.num_hidden_layers)
    model.set_attn_implementation("eager")
    want = []
    for p, r, st in zip(pids, rids, steps):
        with torch.no_grad():
            att = model(input_ids=torch.tensor([p + r]), output_attentions=True).attentions
        t = len(p) + len(r)
        i, j = torch.arange(t)[:, None], torch.arange(t)[None, :]
        far = sum((att[li][0].double() * ((j < i - window) & (j > 0))).sum(-1).mean(0) for li in layers) / len(layers)
        want.append(pivot_count(far.float()[len(p):].numpy(), st))
    assert got["pivot_trace"].tolist() == want
    assert sum(want) > 0  # the comparison is not between zeros


def test_token_batches_bound_the_padded_tokens():
    from devenus.select.score import token_batches

    lengths = [5, 40, 12, 40, 7, 33, 1, 20]
    for batch_size in (1, 3, 8):
        for budget in (None, 1, 39, 40, 80, 100, 1000):
            groups = token_batches(lengths, batch_size, budget)
            assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
            flat = [i for g in groups for i in g]
            assert flat == sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))  # longest first, stable
            for g in groups:
                assert len(g) <= batch_size
                assert len(g) == 1 or budget is None or len(g) * max(lengths[i] for i in g) <= budget
    assert token_batches(lengths, 8, 1) == [[1], [3], [5], [7], [2], [4], [0], [6]]  # below one sequence: alone
    assert token_batches(lengths, 8, 80) == [[1, 3], [5, 7], [2, 4, 0, 6]]
    assert token_batches([], 4, 10) == []
    with pytest.raises(ValueError):
        token_batches(lengths, 0, None)


def test_scores_do_not_depend_on_the_token_budget(model_tok):
    """Every signal, pivot counts included, per sequence in the given order, for any grouping: one
    sequence per forward (the unbatched reference), a budget below one sequence, small and large budgets."""
    from devenus.select.config import MODEL_SIGNALS
    from devenus.select.score import newline_token_ids, step_starts_of

    model, tok = model_tok
    gen = _gen(model, tok, samples=3, max_new_tokens=50, seed=5)
    prompts = [[{"role": "user", "content": "Compute 12 + 345."}], [{"role": "user", "content": "Compute 4821 + 9776."}],
               [{"role": "user", "content": "Compute 7 + 8."}]]
    pids, rids = [], []
    for p, ss in zip(prompts, gen.generate(prompts, ["a", "b", "c"])):
        for s in ss:
            pids.append(tok(prompt_text(tok, p))["input_ids"])
            rids.append(s.response_ids)
    assert len({len(p) + len(r) for p, r in zip(pids, rids)}) >= 3  # lengths differ: batches are padded
    steps = [step_starts_of(r, newline_token_ids(tok)) for r in rids]
    kw = dict(step_starts=steps, pivot_window=6, token_chunk=7, vocab_chunk=50)
    alone = forward_signals(model, pids, rids, MODEL_SIGNALS, batch_size=1, **kw)
    longest = max(len(p) + len(r) for p, r in zip(pids, rids))
    for batch_size, budget in ((32, None), (32, 1), (4, 2 * longest), (32, 3 * longest + 5), (9, 10 ** 6)):
        got = forward_signals(model, pids, rids, MODEL_SIGNALS, batch_size=batch_size, max_batch_tokens=budget, **kw)
        for name in MODEL_SIGNALS:
            np.testing.assert_allclose(got[name], alone[name], rtol=1e-5, atol=1e-6, err_msg=f"{name} {budget}")
        assert got["pivot_trace"].tolist() == alone["pivot_trace"].tolist()


def test_newline_table_is_decoded_once_per_tokenizer(model_tok):
    from devenus.select.score import newline_token_ids

    _, tok = model_tok

    class Counting:
        def __init__(self, inner):
            self.inner, self.decoded, self.extra = inner, 0, []

        def __len__(self):
            return len(self.inner) + len(self.extra)

        def decode(self, ids):
            self.decoded += 1
            i = ids[0]
            return self.inner.decode([i]) if i < len(self.inner) else self.extra[i - len(self.inner)]

    c = Counting(tok)
    first = newline_token_ids(c)
    assert c.decoded == len(tok) and first and first == newline_token_ids(tok)
    assert newline_token_ids(c) is first and c.decoded == len(tok)  # the second call decodes nothing
    c.extra.append("a\nb")  # a token added to the tokenizer: decoded again, and found
    assert newline_token_ids(c) == first | {len(tok)}
    other = Counting(tok)
    newline_token_ids(other)
    assert other.decoded == len(tok)  # per tokenizer object
