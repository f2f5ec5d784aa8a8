"""`rlvr ...` as a subprocess the way a shell runs it, for the tests that check the command line end to end."""

import os
import subprocess
import sys
from pathlib import Path


def run_rlvr(*args: str, cwd: Path, env_extra: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m rlvr ARGS` in `cwd` with its own RLVR_CACHE (cwd/cache), text output captured, killed at `timeout`."""
    env = {**os.environ, "RLVR_CACHE": str(cwd / "cache"), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "rlvr", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def tiny_train(tiny_lm, *extra: str) -> list[str]:
    """`train` arguments for a run of a few seconds on the tests' tiny model: 2 x 2 completions of 1-digit sums."""
    return ["train", f"model.name_or_path={tiny_lm.path}", "rollout=hf", "env.digits=1", "train.prompts_per_step=2",
            "train.completions_per_prompt=2", "train.micro_batch_size=4", "train.eval_prompts=4", "threads=1", *extra]
