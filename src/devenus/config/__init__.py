"""Hydra configs shipped with DE-Venus (a package so Hydra can find them as pkg://devenus.config)."""
