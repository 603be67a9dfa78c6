"""The CPU testbed: synthetic verifiable tasks, a byte-level BPE tokenizer, a tiny Qwen3 model and its
SFT warm start ("base model"), built deterministically from a seed and cached by config.

    from devenus.testbed import build_testbed
    tb = build_testbed()            # cached after the first call
    tb.model_dir, tb.split("train"), tb.report["base_accuracy"]
"""

from devenus.testbed.build import SplitSizes, Testbed, TestbedConfig, build_testbed, default_cache_dir
from devenus.testbed.model import ModelConfig
from devenus.testbed.sft import SFTConfig

__all__ = ["ModelConfig", "SFTConfig", "SplitSizes", "Testbed", "TestbedConfig", "build_testbed", "default_cache_dir"]
