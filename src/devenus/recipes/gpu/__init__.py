"""GPU recipes: one per method, Qwen3-4B-Base on one 8-GPU node with vLLM rollouts and an FSDP2 actor.

Each ``<name>.yaml`` is a typed :class:`Recipe` (devenus.config): the method, its training file and the
verl overrides with the reference hyperparameters of the method's paper where it gives them
(``reference:`` says which), plus ``variables:`` filled from the launch's options (:class:`Variables`);
``common.yaml`` holds what every recipe shares. ``python -m devenus.recipes.gpu`` prepares the data,
checks a recipe without a GPU (``run NAME --dry-run``: the full Hydra config composed and every pre-flight
check of ``devenus.train``, no Ray) and launches it through the run component (devenus.runs.launch).
See docs/gpu.md.
"""
