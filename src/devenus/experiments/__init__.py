"""Experiments on the testbed: one runner (paired arms and seeds, resumable, verl's file tracker), paired
Student-t statistics, and the registered experiment definitions ``devenus experiment NAME`` runs. See
experiments/README.md."""

from devenus.experiments.provenance import MixedResults, Mixing
from devenus.experiments.runner import Arm, Experiment
from devenus.experiments.stats import Interval, mean_interval, paired_over_questions, paired_over_seeds, t_ppf

__all__ = ["Arm", "Experiment", "Interval", "MixedResults", "Mixing", "mean_interval", "paired_over_questions",
           "paired_over_seeds", "t_ppf"]
