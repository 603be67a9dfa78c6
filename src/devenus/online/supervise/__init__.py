"""Weak supervision construction: methods that build a training signal for rows without a trusted target."""

from devenus.online.supervise import grpo, ttrl  # noqa: F401  (registration)
