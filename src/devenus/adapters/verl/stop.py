"""Stopping a run early without copying verl's ``fit()``: the one stop every rule shares (the collapse
guard, :mod:`.collapse`; the rollout budget, :mod:`.budget`).

A rule calls :meth:`StopMixin.request_stop` during a step (from ``_update_actor``). fit() then finishes that
step as usual: its checkpoint where ``trainer.save_freq`` puts one, its validation where ``trainer.test_freq``
puts one, its metrics logged. The next *training* generation raises :class:`RunStop` before anything is
generated (validation generations pass), and :meth:`StopMixin.fit` (wrapping verl's, not copying it)
catches it and returns. Nothing of the next step has run. A request at the last step raises nothing: fit()
ends on its own. The first request of a run is the one reported; later ones change nothing.
"""

from __future__ import annotations


class RunStop(Exception):
    """Raised at the start of the step after a stop was requested; caught by :meth:`StopMixin.fit`.
    ``result["stopped_for"]`` names the rule, ``result["step"]`` the last step the run trained."""

    def __init__(self, result: dict):
        super().__init__(result["message"])
        self.result = result


class StopMixin:
    """Mixed in before verl's RayPPOTrainer (under the rules' mixins)."""

    _run_stop: RunStop | None = None

    def request_stop(self, result: dict) -> None:
        """Stop after this step; ``result`` holds ``stopped_for``, ``step`` and ``message``."""
        if self._run_stop is None:
            self._run_stop = RunStop(result)

    def init_workers(self):
        super().init_workers()
        manager = self.async_rollout_manager
        generate = manager.generate_sequences

        def generate_unless_stopped(prompts):
            # the first training generation after a stop request: fit() logged the requesting step already
            if self._run_stop is not None and not prompts.meta_info.get("validate", False):
                raise self._run_stop
            return generate(prompts)

        manager.generate_sequences = generate_unless_stopped

    def fit(self):
        try:
            return super().fit()
        except RunStop as stop:
            print(f"[devenus] stopped for {stop.result['stopped_for']} at step {stop.result['step']}", flush=True)
            return None
