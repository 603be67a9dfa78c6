"""Offline transitions between dataset versions: D(k) + evidence of round k + a rule -> D(k+1) + manifest."""

from devenus.transitions.build import RULE_METHODS, TransitionError, TransitionResult, build_transition

__all__ = ["RULE_METHODS", "TransitionError", "TransitionResult", "build_transition"]
