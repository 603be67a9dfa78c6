"""The one decoding loop (devenus.generate.hf.decode) drops finished rows as it goes and keeps every draw."""

import pytest

torch = pytest.importorskip("torch")


def test_dropping_finished_rows_keeps_every_draw(base_testbed):
    """The testbed model ends its answers at different lengths, so the decoder drops finished rows as
    it goes: each row still gets the tokens model.generate gives it (same per-row draws), and its
    log-probs are those of a teacher-forced forward."""
    from devenus.generate.hf import _generate, decode, eos_ids_of
    from devenus.generate.sampler import RowSampler
    from devenus.records import read_records

    model, tok = base_testbed.load_model()
    model.eval()
    eos, pad = eos_ids_of(tok, model), tok.pad_token_id
    rows = read_records(base_testbed.split("test_id"))[:3] + read_records(base_testbed.split("test_ood"))[:3]
    prompts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    prompts = [tok.encode(p, add_special_tokens=False) for p in prompts for _ in range(3)]
    prompts[0] = prompts[0][1:]  # one shorter prompt: left padding
    n = len(prompts)
    ids = torch.full((n, max(map(len, prompts))), pad)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, ids.shape[1] - len(p):] = torch.tensor(p)
        mask[i, ids.shape[1] - len(p):] = 1
    seeds = list(range(100, 100 + n))
    batch_sizes = []
    forward = model.forward

    def counting(*args, **kwargs):
        batch_sizes.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    model.forward = counting
    ended = []
    ours, ours_lp, _ = decode(model, ids, mask, 96, RowSampler(seeds, 1.0), eos, pad, want_logprobs=True,
                              on_end=ended.extend)
    del model.forward
    ref, _, _ = _generate(model, ids, mask, 96, RowSampler(seeds, 1.0), eos, pad, 1.0, False, 1.0)

    for i, p in enumerate(prompts):
        a, b = ours[i].tolist(), ref[i].tolist()
        end = next((j + 1 for j, t in enumerate(a) if t in eos), len(a))
        assert a[:end] == b[:end]
        with torch.no_grad():
            logits = model(torch.tensor([p + a[:end]])).logits[0, len(p) - 1: -1]
        forced = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(a[:end])[:, None]).squeeze(-1)
        assert torch.allclose(ours_lp[i, :end], forced, atol=1e-4)
    assert batch_sizes[0] == n and batch_sizes[-1] < n  # finished rows really were dropped on the way
    assert sorted(ended) == [i for i in range(n) if any(t in eos for t in ours[i].tolist())]  # each end once
