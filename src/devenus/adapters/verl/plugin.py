"""DE-Venus's verl plugin: ``VERL_USE_EXTERNAL_MODULES=devenus.adapters.verl.plugin`` (or a ``verl.plugins``
entry point naming it) makes every process that imports verl install DE-Venus's engine extension
(:mod:`devenus.adapters.verl.token_stats`: self-certainty from the actor's log-prob pass, computed only
when a batch asks for it).

The CPU backend's plugin is imported first: the FSDP engine module reads the device at import time,
so a CPU platform must be registered before it (a no-op where an accelerator is present).
"""

from devenus.adapters.verl.cpu import plugin as _cpu_plugin  # noqa: F401  (platform before the engine)
from devenus.adapters.verl.token_stats import install

ENGINE = install()
