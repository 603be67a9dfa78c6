"""Adapters to execution engines. Only ``adapters.verl`` imports verl."""
