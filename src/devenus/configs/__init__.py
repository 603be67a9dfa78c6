"""The config files DE-Venus ships (data, no code): Hydra's config package for ``devenus.train``
(``pkg://devenus.configs``: ``devenus_trainer.yaml`` and the ``method/`` group), verl's agent-loop
registry entry (``agent_loops.yaml``), and example configs for ``devenus select run`` (``select/``) and
``devenus lifecycle`` (``lifecycle/``). The mechanism that reads and checks a config is :mod:`devenus.config`."""
