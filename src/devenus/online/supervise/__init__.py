"""Weak supervision construction: methods that build a training signal for rows without a trusted target."""

from devenus.online.supervise import corewarding, corewarding2, grpo, ttrl  # noqa: F401  (registration)
from devenus.online.supervise import emrl, intuitor  # noqa: F401  (registration)
from devenus.online.supervise import unsupervised  # noqa: F401  (registration)
