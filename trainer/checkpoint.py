"""Checkpoints in plain Hugging Face format plus `trainer_state.pt`, written atomically.

`checkpoints/step_N/` loads with `AutoModelForCausalLM.from_pretrained` as it is. The
trainer state (optimizer, scheduler, RNG, step) sits beside the weights. A directory is
written under a temporary name and renamed when complete, so a run killed while saving
leaves the previous checkpoint as the latest one.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import torch

_STEP_DIR = re.compile(r"^step_(\d+)$")


def save_checkpoint(run_dir: Path, step: int, model, tokenizer, optimizer, scheduler, extra: dict) -> Path:
    final = run_dir / "checkpoints" / f"step_{step}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        **extra,
    }
    torch.save(state, tmp / "trainer_state.pt")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    steps = []
    for path in (run_dir / "checkpoints").glob("step_*"):
        match = _STEP_DIR.match(path.name)
        if match and (path / "trainer_state.pt").exists():
            steps.append((int(match.group(1)), path))
    return max(steps)[1] if steps else None


def load_trainer_state(checkpoint: Path, optimizer, scheduler) -> dict:
    state = torch.load(checkpoint / "trainer_state.pt", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    return state
