"""The module verl imports to load the CPU backend: ``VERL_USE_EXTERNAL_MODULES=<this module>``
or a ``verl.plugins`` entry point naming it. Importing it calls :func:`devenus.adapters.verl.cpu.register`
(a no-op where an accelerator is present)."""

from devenus.adapters.verl.cpu import register

ENABLED = register()
