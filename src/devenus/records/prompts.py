"""Prompt formats: how an imported question becomes the chat messages of a record's ``prompt``.

A format is a system text (optional), worked example turns (a user question and the assistant's answer,
each user text phrased like the question) and the instruction, the user message with a ``{question}``
placeholder. The record's ``prompt`` is then ``[system?] + [user, assistant] * examples + [user]``:
chat messages, exactly what verl's ``RLHFDataset`` hands to the model's chat template.

Formats are registered by name in :data:`FORMATS` (``devenus import --prompt-format NAME``) or read from
a YAML file with the keys of :class:`PromptFormat` (``--prompt-format FILE.yaml``), checked by the one
config mechanism (:mod:`devenus.config`): a bad file is one error line naming the file and the key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from devenus.config import Config, ConfigError, load_config_file, option
from devenus.registry import Registry

#: the user message of an imported question: ask for a boxed final answer, as the verifier reads it
DEFAULT_PROMPT_TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{}."
#: the same for multiple choice: the answer is the option's letter
DEFAULT_CHOICE_TEMPLATE = (
    "{question}\n\nPlease reason step by step, and put the letter of the correct option within \\boxed{}."
)
PLACEHOLDER = "{question}"


class PromptFormatError(ConfigError):
    """A prompt format that cannot be used (one line naming the file or name and the key)."""


@dataclass(frozen=True)
class Example(Config):
    """One worked turn before the question."""

    error: ClassVar[type[ConfigError]] = PromptFormatError

    user: str = option(help="the example's question (phrased by the instruction, like the question)")
    assistant: str = option(help="the answer the model is shown, ending in \\boxed{...} as the verifier reads it")


@dataclass(frozen=True)
class PromptFormat(Config):
    """The keys of a prompt format file (``--prompt-format FILE.yaml``)."""

    error: ClassVar[type[ConfigError]] = PromptFormatError

    system: str | None = option(None, "the system message, first (null: none; a chat template may add its own)")
    examples: tuple[Example, ...] = option((), "worked turns before the question: a list of {user, assistant}")
    instruction: str | None = option(None, "the user message, with a {question} placeholder (null: the import's "
                                           "default, which asks to reason and put the final answer in \\boxed{})")

    def check(self) -> None:
        if self.system is not None and not self.system.strip():
            raise self.error(f"{self.key('system')} must be a non-empty string or null, got {self.system!r}")
        if self.instruction is not None and PLACEHOLDER not in self.instruction:
            raise self.error(f"{self.key('instruction')} must contain the placeholder {PLACEHOLDER}, "
                             f"got {self.instruction!r:.80}")
        for i, ex in enumerate(self.examples):
            for k in ("user", "assistant"):
                if not getattr(ex, k).strip():
                    raise self.error(f"{self.key(f'examples[{i}].{k}')} must be a non-empty string")

    def template(self, choice: bool = False) -> str:
        """The instruction a question is phrased by (the import's default where the format has none)."""
        return self.instruction or (DEFAULT_CHOICE_TEMPLATE if choice else DEFAULT_PROMPT_TEMPLATE)

    def prefix(self, template: str) -> list[dict[str, str]]:
        """The messages before the question: the system text, then each worked turn (user text by ``template``)."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        for ex in self.examples:
            out += [{"role": "user", "content": template.replace(PLACEHOLDER, ex.user)},
                    {"role": "assistant", "content": ex.assistant}]
        return out

    def messages(self, question: str, choice: bool = False) -> list[dict[str, str]]:
        """The whole ``prompt`` of a record whose question (with its options, for multiple choice) is ``question``."""
        t = self.template(choice)
        return [*self.prefix(t), {"role": "user", "content": t.replace(PLACEHOLDER, question)}]

    def replace(self, system: str | None = None, instruction: str | None = None) -> "PromptFormat":
        """This format with its system text and/or instruction replaced (None: kept)."""
        return PromptFormat(system=self.system if system is None else system, examples=self.examples,
                            instruction=self.instruction if instruction is None else instruction)

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "examples": [{"user": e.user, "assistant": e.assistant} for e in self.examples],
                "instruction": self.instruction}

    def sha256(self) -> str:
        """The format's identity: the hash of its keys as canonical JSON (the manifest records it)."""
        text = json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: the answer instruction SmolLM2's pool asks with: a chat model answers in prose unless asked, and the
#: verifier reads the last \boxed{}
_SMOLLM2_INSTRUCTION = PLACEHOLDER + " Put the final answer in \\boxed{}."

#: the registered formats, by name (``devenus import --prompt-format NAME``), on the one registry helper
FORMATS: Registry[PromptFormat] = Registry("prompt format", ordered=True)
# the import's default: the question, then a request to reason and box the final answer
FORMATS.register("plain", PromptFormat())
# devenus.smollm2's phrasing: asked alone, SmolLM2-135M answers in prose and rarely boxes (0 of 32 samples on
# 8 questions verified correct); after one worked turn it boxes nearly all. No system text: the model's chat
# template adds its own default one.
FORMATS.register("smollm2-worked", PromptFormat(
    instruction=_SMOLLM2_INSTRUCTION,
    examples=(Example(user="Compute 2 + 5.", assistant="2 + 5 = 7. The final answer is \\boxed{7}."),)))
DEFAULT_FORMAT = "plain"
#: a --prompt-format value with one of these endings is a file, anything else a registered name
FILE_SUFFIXES = (".yaml", ".yml", ".json")


def prompt_format(spec: "str | Path | PromptFormat | None" = None) -> tuple[str, PromptFormat]:
    """``(name, format)`` for a registered name, a format file (``.yaml``/``.yml``/``.json``; its name is
    the file's name) or a :class:`PromptFormat` (named ``custom``); None is :data:`DEFAULT_FORMAT`."""
    if spec is None:
        spec = DEFAULT_FORMAT
    if isinstance(spec, PromptFormat):
        return "custom", spec
    text = str(spec)
    if text in FORMATS:
        return text, FORMATS[text]
    if Path(text).suffix.lower() in FILE_SUFFIXES:
        return Path(text).name, load_config_file(PromptFormat, text)
    raise PromptFormatError(f"unknown prompt format {text!r}: give one of {', '.join(FORMATS)} or a "
                            f"{'/'.join(FILE_SUFFIXES)} file with the keys system, examples, instruction")
