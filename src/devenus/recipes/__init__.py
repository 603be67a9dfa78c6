"""Recipes: ready configurations that put the library's components together (torchtune's split)."""
