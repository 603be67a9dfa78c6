"""The testbed's tiny Qwen3-architecture causal LM (~1M parameters), built from config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 256
    # The logits dimension is padded past the tokenizer size, as real checkpoints do, so code that
    # confuses len(tokenizer) with the logits width V fails on the testbed too.
    pad_vocab_to_multiple_of: int = 64


def padded_vocab(n_tokens: int, multiple: int) -> int:
    return ((n_tokens + multiple - 1) // multiple) * multiple


def build_model(cfg: ModelConfig, tokenizer, seed: int):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    hf_cfg = Qwen3Config(
        vocab_size=padded_vocab(len(tokenizer), cfg.pad_vocab_to_multiple_of),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        head_dim=cfg.hidden_size // cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(hf_cfg)
