"""The rollout-saving rules, verl-free: which prompts a step generates and which groups it trains on.

- :mod:`.skipping`: skip prompts before rollout from their reward history (GRESO, docs/sampling/skipping.md);
- :mod:`.dynamic_sampling`: drop the groups that teach nothing and refill their slots (DAPO,
  docs/sampling/dynamic_sampling.md).

The verl adapter (:mod:`devenus.adapters.verl.sampling`) calls them around the rollout.
"""
