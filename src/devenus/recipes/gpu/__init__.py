"""GPU recipes: one per method, Qwen3-4B-Base on one 8-GPU node with vLLM rollouts and an FSDP2 actor.

Each ``<name>.yaml`` holds the method, its training file and the verl overrides with the reference
hyperparameters of the method's paper where it gives them (``reference:`` says which); ``common.yaml``
holds what every recipe shares. ``python -m devenus.recipes.gpu`` prepares the data, checks a recipe
without a GPU (``run NAME --dry-run``: the full Hydra config composed and every pre-flight check of
``devenus.train``, no Ray) and launches it. See docs/gpu.md.
"""

from devenus.recipes.gpu.launch import Recipe, load_recipe, recipe_names, recipe_overrides

__all__ = ["Recipe", "load_recipe", "recipe_names", "recipe_overrides"]
