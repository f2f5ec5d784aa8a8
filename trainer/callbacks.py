"""Callbacks: `rlvr.train(callbacks=[...])` hooks into the training loop (trainer/run.py).

A callback is any object with one or more of these methods (each optional):

    on_step(step, metrics, samples)   after each step's update: its metrics dict (before the step's eval) and
                                      its samples (the dicts samples.jsonl receives)
    on_eval(step, results)            after each held-out eval (step 0 included): the `eval/*` metrics
    on_end(summary, checkpoint)       once, after the run: summary.json's content and the last checkpoint's path

`on_step` or `on_eval` returning `True` stops the run after that step: the step is evaluated (if it was not),
logged and checkpointed, and the summary says which callback stopped it. Only `True` stops (a hook that returns
a number or a dict by accident does not). Unlike TRL's `TrainerCallback` (args, state, control), a hook gets the
values themselves; a TRL callback, which has none of these methods, is refused rather than silently never called.
Hooks run on the main rank (rank 0) alone; the stop is passed to every rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlvr.trainer.distributed import gather_objects

HOOKS = ("on_step", "on_eval", "on_end")


class Callbacks:
    """The run's callbacks, called in the order given; `stopped_by` names the first that asked to stop."""

    def __init__(self, callbacks: Sequence[Any] | None):
        callbacks = list(callbacks or [])
        for callback in callbacks:
            if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
                raise TypeError(f"callback {callback!r:.80} has none of the methods {', '.join(HOOKS)} "
                                f"(trainer/callbacks.py); a TRL TrainerCallback's on_step_end is not called by rlvr")
        self.callbacks = callbacks
        self.stopped_by: str | None = None

    def on_step(self, step: int, metrics: dict, samples: list[dict]) -> None:
        self._call("on_step", step, metrics, samples)

    def on_eval(self, step: int, results: dict) -> None:
        self._call("on_eval", step, results)

    def on_end(self, summary: dict, checkpoint: Any) -> None:
        self._call("on_end", summary, checkpoint)

    def should_stop(self) -> bool:
        """Whether any rank's callback asked to stop (a collective: every rank calls it each step)."""
        names = [n for n in gather_objects(self.stopped_by) if n is not None]
        if names and self.stopped_by is None:
            self.stopped_by = names[0]
        return bool(names)

    def _call(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if callable(method) and method(*args) is True and self.stopped_by is None and hook != "on_end":
                self.stopped_by = f"{type(callback).__name__}.{hook}"
