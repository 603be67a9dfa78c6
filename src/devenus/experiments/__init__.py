"""Experiments on the testbed: one runner (paired arms and seeds, resumable, verl's file tracker) and
paired Student-t statistics. See experiments/README.md."""

from devenus.experiments.provenance import MixedResults, Mixing
from devenus.experiments.runner import Arm, Experiment, SharedRay, seed_list
from devenus.experiments.stats import Interval, mean_interval, paired_over_questions, paired_over_seeds, t_ppf

__all__ = ["Arm", "Experiment", "Interval", "MixedResults", "Mixing", "SharedRay", "mean_interval", "paired_over_questions", "paired_over_seeds",
           "seed_list", "t_ppf"]
