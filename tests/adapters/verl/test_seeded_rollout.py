"""The hf rollout server samples from per-request seeds (no Ray): a request's sample does not depend on
its batch companions, repeats differ, the rollout seed matters. The sampler and the decoding loop are
devenus.generate's (tests/generate)."""

import asyncio

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.verl

SAMPLE = dict(temperature=1.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, logprobs=True)


def _server(fx, seed: int):
    from omegaconf import OmegaConf
    from verl.workers.config import RolloutConfig

    from devenus.adapters.verl.cpu.hf_rollout import HFRolloutServer

    cfg = RolloutConfig(name="hf", prompt_length=64, response_length=16, tensor_model_parallel_size=1, seed=seed)
    mc = OmegaConf.create({"path": str(fx["model"]), "override_config": {"attn_implementation": "eager"}})
    return HFRolloutServer(cfg, mc)


@pytest.fixture(scope="module")
def server(verl_cpu_fx):
    return _server(verl_cpu_fx, seed=7)


def _prompt(server, q: str) -> list[int]:
    tok = server.model_config.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


async def _at_step(server, step, requests):
    await server.set_global_steps(step)
    return await asyncio.gather(*[server.generate(p, dict(SAMPLE), rid) for p, rid in requests])


def test_a_request_draws_the_same_sample_alone_or_in_any_batch(server):
    p = _prompt(server, "What is 3+4?")
    others = [_prompt(server, f"What is {i}+{i * 3}? Think.") for i in range(6)]

    async def go():
        alone = (await _at_step(server, 5, [(p, "det-3")]))[0]
        await _at_step(server, 6, [(p, "det-3")])  # another step in between resets the repeat count
        mixed = await _at_step(server, 5, [(q, f"det-{i + 10}") for i, q in enumerate(others)] + [(p, "det-3")])
        return alone, mixed[-1], server.num_generate_calls

    alone, in_batch, _ = asyncio.run(go())
    assert alone.token_ids == in_batch.token_ids
    # the logits themselves move in the last float bits with the batch's shape (CPU GEMM blocking);
    # a draw can only change where two candidates tie to ~1e-6 (docs/cpu_backend.md)
    assert torch.allclose(torch.tensor(alone.log_probs), torch.tensor(in_batch.log_probs), atol=1e-5)


def test_identity_parts_change_the_sample(server, verl_cpu_fx):
    p = _prompt(server, "What is 5+6?")

    async def go(srv, step, rid, times=1):
        return await _at_step(srv, step, [(p, rid)] * times)

    base = asyncio.run(go(server, 1, "det-0"))[0].token_ids
    assert asyncio.run(go(server, 2, "det-0"))[0].token_ids != base  # another step
    assert asyncio.run(go(server, 1, "det-0"))[0].token_ids == base  # back at step 1: the same draw
    assert asyncio.run(go(server, 1, "det-0"))[0].token_ids != base  # a repeat within one step draws afresh
    twice = asyncio.run(go(server, 3, "det-0", times=2))  # ... also inside one batch
    assert twice[0].token_ids != twice[1].token_ids
    asyncio.run(go(server, 2, "det-0"))
    assert asyncio.run(go(server, 1, "det-1"))[0].token_ids != base  # another sample index
    other_seed = _server(verl_cpu_fx, seed=8)
    assert asyncio.run(go(other_seed, 1, "det-0"))[0].token_ids != base  # another rollout.seed


def test_batches_are_cut_by_sample_index_not_by_arrival(verl_cpu_fx):
    from omegaconf import OmegaConf
    from verl.workers.config import RolloutConfig

    from devenus.adapters.verl.cpu.hf_rollout import HFRolloutServer

    cfg = RolloutConfig(name="hf", prompt_length=64, response_length=4, tensor_model_parallel_size=1, max_num_seqs=4)
    mc = OmegaConf.create({"path": str(verl_cpu_fx["model"]), "override_config": {"attn_implementation": "eager"}})
    srv = HFRolloutServer(cfg, mc)
    prompts = {i: _prompt(srv, f"What is {i}+1?") for i in range(9)}
    which = {tuple(p): i for i, p in prompts.items()}
    batches = []
    real = srv._generate_batch

    def recording(batch_prompts, key, seeds=None):
        batches.append([which[tuple(p)] for p in batch_prompts])
        return real(batch_prompts, key, seeds)

    srv._generate_batch = recording

    async def go():
        async def one(i, delay):
            await asyncio.sleep(delay)
            return await srv.generate(prompts[i], dict(SAMPLE), f"det-{i}")

        order = [5, 1, 7, 0, 3, 2, 6, 4, 8]  # arrival order, 20 ms apart (inside the quiet window)
        return await asyncio.gather(*[one(i, 0.02 * k) for k, i in enumerate(order)])

    outs = asyncio.run(go())
    assert len(outs) == 9 and all(o.token_ids for o in outs)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]  # full slots at once, the partial one when quiet


def test_top_k_is_the_configured_one(server):
    """top_k=-1 samples the whole vocabulary (model.generate would silently apply its default top-50)."""
    p = _prompt(server, "Say anything.")

    async def first_tokens(top_k):
        await server.set_global_steps(100 + top_k)
        outs = await asyncio.gather(*[server.generate(p, dict(SAMPLE, top_k=top_k, max_tokens=1), f"det-{i}")
                                      for i in range(150)])
        return {o.token_ids[0] for o in outs}

    assert len(asyncio.run(first_tokens(-1))) > 50  # the random fixture model is near-uniform over ~300
    assert len(asyncio.run(first_tokens(5))) <= 5
