"""How far a reader follows one GRPO step: the trainer's source files it runs code in, counted by tracing.

The count is what docs/architecture.md's "path of one step" describes and what a refactor of the trainer is
measured by: `sys.setprofile` records every Python function called during `run.algorithm.step(run.ctx, 1)` of a
tiny GRPO run on the HF engine (built by trainer/setup.py as `rlvr train` builds it), and the test keeps the files
under trainer/ (the environment's and the verifiers' files are the plug-ins a step calls, not the trainer's
path). MOST_FILES is the count on 2026-12-05 (19 files; 21 before the rollout lengths were resolved once in setup
and the lr schedule and the engine's weight hand-over left setup.py): the path may get shorter, not longer,
without this line changing with it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlvr.api import train_config
from rlvr.trainer.setup import build_run
from tests.cli_run import tiny_train

TRAINER = Path(__file__).resolve().parent.parent / "trainer"
MOST_FILES = 19


def test_one_grpo_step_stays_within_the_trainer_files_it_visits_today(tiny_lm, tmp_path):
    cfg = train_config(tiny_train(tiny_lm, f"output_dir={tmp_path / 'run'}")[1:])  # [0] is the command, train
    run = build_run(cfg, log=lambda *_: None)
    visited: dict[str, set[str]] = {}

    def record(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(TRAINER):
                visited.setdefault(str(path.relative_to(TRAINER)), set()).add(frame.f_code.co_name)

    sys.setprofile(record)
    try:
        metrics, _ = run.algorithm.step(run.ctx, 1)
    finally:
        sys.setprofile(None)
        run.env.shutdown()
        run.ctx.engine.shutdown()
        run.parallel.close()
        run.files.close()
    assert "loss" in metrics or any(k.startswith("reward/") for k in metrics), sorted(metrics)
    path = "\n".join(f"{name}: {', '.join(sorted(functions))}" for name, functions in sorted(visited.items()))
    assert {"step.py", "algos/grpo.py", "experience/collect.py", "rollout/hf.py"} <= set(visited), path
    assert len(visited) <= MOST_FILES, f"one GRPO step now runs code in {len(visited)} trainer files:\n{path}"
