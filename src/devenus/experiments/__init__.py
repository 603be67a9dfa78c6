"""Experiments on the testbed: one runner (paired arms and seeds, resumable, verl's file tracker), paired
Student-t statistics, and the registered experiment definitions ``devenus experiment NAME`` runs. See
experiments/README.md."""

from devenus.experiments.runner import Arm, Experiment

__all__ = ["Arm", "Experiment"]
