"""`rlvr.train(callbacks=[...])` (trainer/callbacks.py, trainer/run.py): the hooks are called in the loop's order
with the step's values, and a hook returning True stops the run after that step, evaluated, checkpointed and
summarised as stopped."""

import json

import pytest

import rlvr
from rlvr.trainer.callbacks import Callbacks


class EarlyStop:
    """Records every call; stops once the step reaches `at`."""

    def __init__(self, at: int):
        self.at, self.calls = at, []

    def on_step(self, step, metrics, samples):
        self.calls.append(("step", step, set(metrics), [len(s["completions"]) for s in samples]))
        return step >= self.at

    def on_eval(self, step, results):
        self.calls.append(("eval", step, set(results)))

    def on_end(self, summary, checkpoint):
        self.calls.append(("end", summary, checkpoint))


class Watcher:
    """A second callback with one hook only: it sees every step, and its return value (a number) stops nothing."""

    def __init__(self):
        self.steps = []

    def on_step(self, step, metrics, samples):
        self.steps.append(step)
        return 1


def test_a_callback_stops_a_ten_step_run_after_step_two(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stopper, watcher, lines = EarlyStop(at=2), Watcher(), []
    run = rlvr.train(env="arithmetic", model={"name": "hf", "name_or_path": str(tiny_lm.path)},
                     rollout={"name": "hf", "max_new_tokens": 8}, output_dir=str(tmp_path / "run"),
                     train={"steps": 10, "prompts_per_step": 2, "completions_per_prompt": 2, "eval_prompts": 2,
                            "eval_every": 5, "save_every": 5},
                     callbacks=[stopper, watcher], log=lines.append)

    kinds = [(c[0], c[1]) if c[0] != "end" else ("end",) for c in stopper.calls]
    assert kinds == [("eval", 0), ("step", 1), ("step", 2), ("eval", 2), ("end",)]
    _, _, step_keys, completions = stopper.calls[1]
    assert {"reward/mean", "loss"} <= step_keys and not any(k.startswith("eval/") for k in step_keys)
    assert completions == [2, 2]  # samples.jsonl's records: 2 prompts, 2 completions each
    assert "eval/accuracy" in stopper.calls[0][2] and "eval/accuracy" in stopper.calls[3][2]
    assert watcher.steps == [1, 2]  # the other callback saw the stopping step too, and nothing after it

    assert [m["step"] for m in run.metrics] == [0, 1, 2] and "eval/accuracy" in run.metrics[-1]
    assert run.checkpoint == run.run_dir / "checkpoints" / "step_2"
    assert (run.checkpoint / "trainer_state.pt").exists()  # resumable from there
    assert run.summary["stopped_by"] == "EarlyStop.on_step" and run.summary["steps"] == 2
    assert run.summary["after"]["step"] == 2 and run.summary["steps_this_session"] == 2
    assert json.loads((run.run_dir / "summary.json").read_text())["stopped_by"] == "EarlyStop.on_step"
    assert "2 steps (stopped by the callback EarlyStop.on_step)" in lines[-1]
    _, end_summary, end_checkpoint = stopper.calls[-1]
    assert end_summary == run.summary and end_checkpoint == run.checkpoint


def test_a_callback_without_hooks_is_refused_before_the_run():
    class TrlStyle:  # TRL's TrainerCallback spells its hooks otherwise: never called, so refused
        def on_step_end(self, args, state, control):
            pass

    with pytest.raises(TypeError, match=r"has none of the methods on_step, on_eval, on_end"):
        Callbacks([TrlStyle()])


def test_only_true_stops_and_the_first_stopper_is_named():
    class Stop:
        def on_eval(self, step, results):
            return True

    hooks = Callbacks([Watcher(), Stop(), Stop()])
    hooks.on_step(1, {}, [])
    assert hooks.stopped_by is None and not hooks.should_stop()  # Watcher returned 1, not True
    hooks.on_eval(1, {})
    assert hooks.should_stop() and hooks.stopped_by == "Stop.on_eval"
