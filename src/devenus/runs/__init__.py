"""One run component: launch ``python -m devenus.train`` and read what verl wrote.

- :func:`launch` starts the run in its own process group with a watchdog and a timeout, and returns a
  :class:`RunResult`: per-step metrics from verl's ``file`` tracker and the validation dumps of
  ``trainer.validation_data_dir``. Nothing is read from console output.
- :mod:`devenus.runs.logs` reads those files (also for runs that finished long ago).
- :mod:`devenus.runs.testbed` sizes a run for the CPU testbed (a list of overrides).
- :mod:`devenus.runs.console` turns those records into one readable line per step and an end-of-run summary
  (what ``devenus train`` prints).

``devenus train``, the demo, ``devenus lifecycle``, the experiment runner and the end-to-end tests all launch
through here.
"""

from devenus.runs.launch import RunResult, launch, with_file_logger
from devenus.runs.logs import read_metrics, scores_per_question, validation_dumps

__all__ = ["RunResult", "launch", "read_metrics", "scores_per_question", "validation_dumps", "with_file_logger"]
