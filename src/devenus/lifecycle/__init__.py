"""The outer loop: rounds of train on D(k) -> evidence (visits and probes) -> transition -> D(k+1)."""

from devenus.lifecycle.config import LifecycleConfig, LifecycleConfigError, load_config
from devenus.lifecycle.run import run_lifecycle
