"""A test-only spy on verl's memory protocol, loaded through ``devenus.plugins`` (in the task runner): after
``init_workers`` it wraps the calls of the protocol on the trainer's verl objects, prints one line per call
(``[protocol-spy] <call> step=<global_steps>``) and forwards it to verl's own object. Calls: ``wake``
(``checkpoint_manager.update_weights``: verl's wake, a weight sync), ``sleep``
(``checkpoint_manager.sleep_replicas``), ``generate`` (``async_rollout_manager.generate_sequences``, as fit()
and refill call it) and ``log_prob`` (``actor_rollout_wg.compute_log_prob``, the actor's log-prob pass)."""

from devenus.adapters.verl.trainer import DeVenusTrainer

TAG = "[protocol-spy]"
_init_workers = DeVenusTrainer.init_workers


def _spy(trainer, owner, name: str, call: str) -> None:
    real = getattr(owner, name)

    def recorded(*args, **kwargs):
        print(f"{TAG} {call} step={getattr(trainer, 'global_steps', 0)}", flush=True)
        return real(*args, **kwargs)

    setattr(owner, name, recorded)


def init_workers(self):
    _init_workers(self)
    _spy(self, self.checkpoint_manager, "update_weights", "wake")
    _spy(self, self.checkpoint_manager, "sleep_replicas", "sleep")
    _spy(self, self.async_rollout_manager, "generate_sequences", "generate")
    _spy(self, self.actor_rollout_wg, "compute_log_prob", "log_prob")


DeVenusTrainer.init_workers = init_workers
