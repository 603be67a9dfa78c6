"""The vectorised token log-probabilities give verl's own values and gradients, bit for bit."""

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.verl


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(500, 384), (6, 40, 384), (2, 3, 5, 97), (1, 11)])
def test_values_and_gradients_match_verl(shape, dtype, monkeypatch):
    from devenus.adapters.verl.cpu import logprobs

    monkeypatch.setattr(logprobs, "MAX_BLOCK_ELEMENTS", 384 * 7)  # several blocks, a ragged last one
    torch.manual_seed(0)
    x = (torch.randn(*shape) * 4).to(dtype).requires_grad_(True)
    labels = torch.randint(0, shape[-1], shape[:-1])
    ref = logprobs.verl_original()(x, labels)
    ours = logprobs.logprobs_from_logits_v2(x, labels)
    assert ours.dtype == ref.dtype and torch.equal(ours, ref)
    g = torch.randn_like(ref)
    assert torch.equal(torch.autograd.grad(ours, x, g)[0], torch.autograd.grad(ref, x, g)[0])


def test_install_reaches_the_function_verl_calls():
    from verl.utils import torch_functional

    from devenus.adapters.verl.cpu import logprobs

    assert logprobs.install()
    assert torch_functional.logprobs_from_logits_v2 is logprobs.logprobs_from_logits_v2
    x, labels = torch.randn(9, 16), torch.randint(0, 16, (9,))
    # the public entry point (no flash-attn on this machine) now goes through the vectorised version
    assert torch.equal(torch_functional.logprobs_from_logits(x, labels), logprobs.verl_original()(x, labels))
