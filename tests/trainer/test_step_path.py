"""How far a reader follows one GRPO step: the trainer's source files it runs code in, counted by tracing.

The count is what docs/architecture.md's "path of one step" describes and what a refactor of the trainer is
measured by: `sys.setprofile` records every Python function called during `train_step(run.ctx, 1, run.algorithm)` of a
tiny GRPO run on the HF engine (built by trainer/setup.py as `rlvr train` builds it), and the test keeps the files
under trainer/ (the environment's and the verifiers' files are the plug-ins a step calls, not the trainer's
path). MOST_FILES is the count on 2026-12-05 (19 files; 21 before the rollout lengths were resolved once in setup
and the lr schedule and the engine's weight hand-over left setup.py): the path may get shorter, not longer,
without this line changing with it. The learning half alone, the algorithm's `update(ctx, batch)` on a batch
collected beforehand (`grpo_update`: advantages, logprobs, loss, micro-batch update), is held to
MOST_UPDATE_FILES (9 on 2026-12-06).
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlvr.api import train_config
from rlvr.trainer.experience.collect import collect
from rlvr.trainer.setup import build_run
from rlvr.trainer.step import train_step
from tests.cli_run import tiny_train

TRAINER = Path(__file__).resolve().parents[2] / "trainer"
MOST_FILES = 19
MOST_UPDATE_FILES = 9


def _trace(call) -> dict[str, set[str]]:
    """The trainer files `call()` runs code in, each with the functions called there."""
    visited: dict[str, set[str]] = {}

    def record(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(TRAINER):
                visited.setdefault(str(path.relative_to(TRAINER)), set()).add(frame.f_code.co_name)

    sys.setprofile(record)
    try:
        call()
    finally:
        sys.setprofile(None)
    return visited


def _listed(visited: dict[str, set[str]]) -> str:
    return "\n".join(f"{name}: {', '.join(sorted(functions))}" for name, functions in sorted(visited.items()))


def _tiny_run(tiny_lm, tmp_path):
    cfg = train_config(tiny_train(tiny_lm, f"output_dir={tmp_path / 'run'}")[1:])  # [0] is the command, train
    return build_run(cfg, log=lambda *_: None)


def _close(run) -> None:
    run.env.shutdown()
    run.ctx.engine.shutdown()
    run.parallel.close()
    run.files.close()


def test_one_grpo_step_stays_within_the_trainer_files_it_visits_today(tiny_lm, tmp_path):
    run = _tiny_run(tiny_lm, tmp_path)
    metrics = {}
    try:
        visited = _trace(lambda: metrics.update(train_step(run.ctx, 1, run.algorithm)[0]))
    finally:
        _close(run)
    assert "loss" in metrics or any(k.startswith("reward/") for k in metrics), sorted(metrics)
    path = _listed(visited)
    assert {"step.py", "algos/grpo.py", "experience/collect.py", "rollout/hf.py"} <= set(visited), path
    assert len(visited) <= MOST_FILES, f"one GRPO step now runs code in {len(visited)} trainer files:\n{path}"


def test_the_grpo_update_alone_stays_within_the_files_it_visits_today(tiny_lm, tmp_path):
    run = _tiny_run(tiny_lm, tmp_path)
    try:
        batch = collect(run.ctx, 1)
        update = run.algorithm.update  # the row's update, which train_step calls
        assert update.__name__ == "grpo_update"
        metrics = {}
        visited = _trace(lambda: metrics.update(update(run.ctx, batch)))
    finally:
        _close(run)
    assert "loss" in metrics, sorted(metrics)
    path = _listed(visited)
    assert {"algos/grpo.py", "algos/update.py", "models/logprobs.py"} <= set(visited), path
    assert not any(name.startswith(("rollout/", "experience/collect", "experience/rewards")) for name in visited), path
    assert len(visited) <= MOST_UPDATE_FILES, f"grpo_update now runs code in {len(visited)} trainer files:\n{path}"
