"""DE-Venus's adapter to verl 0.9.1: the only package in the project that imports verl.

Subpackages:

- ``cpu``  a CPU backend for verl (platform, ``hf`` rollout, torch shims), loaded in every Ray
  process through verl's own plugin mechanism. See ``docs/cpu_backend.md``.
"""
