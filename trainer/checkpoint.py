"""Checkpoints in plain Hugging Face format plus `trainer_state.pt`, written atomically.

`checkpoints/step_N/` loads with `AutoModelForCausalLM.from_pretrained` as it is. The
trainer state (optimizer, scheduler, RNG, step) sits beside the weights. A directory is
written under a temporary name and renamed when complete, so a run killed while saving
leaves the previous checkpoint as the latest one. A LoRA policy is saved merged, with its
adapter under `adapter/` for resuming (trainer/models/lora.py); under torchrun rank 0 alone writes,
the weights and optimizer state it is given being the full ones (trainer/distributed.py). The files a
checkpoint carries to explain itself (its model card and config, trainer/model_card.py) are written
into it before the rename, so a checkpoint never exists without them, and so is every text file's rewrite without
the machine's paths (the run directory, the caches, HOME, the temporary directory: trainer/share_paths.py), so the
folder is shared as it is; `train.push_to_hub` then uploads it (trainer/hub.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from rlvr.trainer.models.lora import ADAPTER_DIR, is_lora, merged_copy
from rlvr.trainer.share_paths import local_path, share_folder, shareable

_STEP_DIR = re.compile(r"^step_(\d+)$")


def save_checkpoint(run_dir: Path, step: int, model, tokenizer, optimizer, scheduler, extra: dict,
                    optimizer_state: dict | None = None, files: dict[str, str] | None = None) -> Path:
    """`optimizer_state` replaces `optimizer.state_dict()` when given (FSDP2's gathered full state);
    `files` maps paths inside the checkpoint to their text (written last: a card replaces peft's template)."""
    final = run_dir / "checkpoints" / f"step_{step}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if is_lora(model):  # the merged model, as any HF model; the adapter beside it for resume (trainer/models/lora.py)
        merged_copy(model).save_pretrained(tmp)
        model.save_pretrained(tmp / ADAPTER_DIR)
    else:
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer_state is None else optimizer_state,
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        **extra,
    }
    # the state's only paths, written shareably (trainer/share_paths.py); saved_entries reads them back
    if state.get("base_model"):
        state["base_model"] = shareable(str(state["base_model"]), run_dir)
    if state.get("commands"):
        state["commands"] = [{**c, "command": c.get("command") and shareable(c["command"], run_dir)}
                             for c in state["commands"]]
    torch.save(state, tmp / "trainer_state.pt")
    for name, text in (files or {}).items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    share_folder(tmp, run_dir)  # no machine path in any text file: the folder is shared as it is
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def state_layout(cfg) -> dict:
    """The config values the checkpoint depends on: what model it is (the environment names the tiny model's
    vocabulary and warm start; a resume that builds another base model or tokenizer reads the checkpoint's ids as
    another vocabulary's), and the parameters the optimizer holds moments for (the policy or its LoRA adapters, plus
    PPO's critic), so a resume must build the same ones. Anything else (steps, learning rate, the environment's
    difficulty, the engine) may change on resume."""
    return {
        "env.name": cfg.env.name,
        "model.name": cfg.model.name,
        "model.name_or_path": cfg.model.get("name_or_path"),
        "model.arch": OmegaConf.to_container(cfg.model.arch) if "arch" in cfg.model else None,
        "algo.critic": cfg.algo.get("critic"),  # the families with a critic have the key (ppo's); others: None
        "model.lora.r": cfg.model.lora.r,
        "model.lora.target_modules": list(cfg.model.lora.target_modules) if cfg.model.lora.r else None,
        "model.lora.peft": OmegaConf.to_container(peft) if isinstance(peft := cfg.model.lora.get("peft"), DictConfig)
        else peft,
    }


def resume_conflicts(saved_cfg, cfg) -> list[str]:
    """'key: the run's value -> this command's value' for each `state_layout` entry that differs."""
    saved, now = state_layout(saved_cfg), state_layout(cfg)
    return [f"{key}: {saved[key]!r} in the run, {now[key]!r} now" for key in saved if saved[key] != now[key]]


def latest_checkpoint(run_dir: Path) -> Path | None:
    steps = []
    for path in (run_dir / "checkpoints").glob("step_*"):
        match = _STEP_DIR.match(path.name)
        if match and (path / "trainer_state.pt").exists():
            steps.append((int(match.group(1)), path))
    return max(steps)[1] if steps else None


def saved_entries(checkpoint: Path, *keys: str) -> dict:
    """The small entries `keys` of a checkpoint's trainer state (its tensors memory-mapped, not read), for what
    the run needs to know before it builds anything, e.g. the `base_model` it recorded."""
    state = torch.load(checkpoint / "trainer_state.pt", weights_only=False, mmap=True, map_location="cpu")
    found = {key: state[key] for key in keys if key in state}
    if found.get("base_model"):  # written shareably (save_checkpoint): a path on this machine again
        found["base_model"] = local_path(found["base_model"], checkpoint.parent.parent)
    return found


def load_trainer_state(checkpoint: Path, optimizer, scheduler, load_optimizer=None, rank: int = 0) -> dict:
    """`load_optimizer(state)` replaces `optimizer.load_state_dict` when given (FSDP2 re-shards the full state).
    Rank r of a data-parallel run restores its own RNG stream (`rank_rng`) when the checkpoint has one for it."""
    state = torch.load(checkpoint / "trainer_state.pt", weights_only=False)
    (load_optimizer or optimizer.load_state_dict)(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    rank_rng = state.get("rank_rng") or []
    torch.set_rng_state(rank_rng[rank] if rank < len(rank_rng) else state["torch_rng"])
    return state
