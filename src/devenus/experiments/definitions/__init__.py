"""The shipped experiments, one module each: its docstring is the plan (written before its runs), its
``DEFINITION`` what ``devenus experiment NAME`` runs (registered in
:data:`devenus.experiments.definition.EXPERIMENTS`)."""
