"""`train.push_to_hub`: each saved checkpoint uploaded to a Hugging Face Hub model repository, as TRL does.

TRL's (transformers') default `hub_strategy="every_save"` pushes the model at each save to the root of the repo
`hub_model_id`, which defaults to the output directory's name under the user's namespace; rlvr does the same: at
each checkpoint it calls huggingface_hub's own `HfApi().create_repo(exist_ok=True)` and `HfApi().upload_folder`
with the checkpoint folder, so the repo holds the latest checkpoint and its history one commit per save. The folder
goes as it is (weights, tokenizer, model card, rlvr_config.yaml, a LoRA run's `adapter/`) except
`trainer_state.pt`, the optimizer state that only `resume=` reads (TRL's every_save leaves checkpoint-N/ optimizer
state out of the repo too). Departures from TRL: the upload runs in the training process, not as a background
future (a save is rare and the next one must not overtake it); the token is not a config key (`hub_token` would be
written into config.yaml and every checkpoint): huggingface_hub reads HF_TOKEN or `hf auth login`'s.

A failed upload (no network, no token, a refused repo) is one warning on the console naming the repo, the cause
and the local checkpoint, which stays where it is; the run goes on (its next save tries again). Network timeouts
are huggingface_hub's own (HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT and its HTTP client's).
"""

from __future__ import annotations

from pathlib import Path

NOT_UPLOADED = ["trainer_state.pt"]


def repo_name(cfg, run_dir: Path) -> str:
    """`train.hub_model_id`, else the run directory's name (TRL: the output_dir's), which the Hub puts under the
    token's user."""
    return cfg.train.get("hub_model_id") or Path(run_dir).resolve().name


def push_checkpoint(cfg, checkpoint: Path, step: int, log=print) -> str | None:
    """Upload `checkpoint` when `train.push_to_hub` (module docstring); the repo id, or None (off or failed)."""
    if not cfg.train.get("push_to_hub"):
        return None
    repo = repo_name(cfg, checkpoint.parent.parent)
    try:
        from huggingface_hub import HfApi

        api = HfApi()
        repo_id = api.create_repo(repo, private=cfg.train.get("hub_private_repo"), exist_ok=True,
                                  repo_type="model").repo_id
        api.upload_folder(repo_id=repo_id, folder_path=str(checkpoint), repo_type="model",
                          commit_message=f"rlvr: checkpoint step {step}", ignore_patterns=NOT_UPLOADED)
    except Exception as error:  # noqa: BLE001 - any failure of the upload: warned, the local checkpoint kept
        cause = str(error).strip().splitlines()[0] if str(error).strip() else ""
        log(f"warning: push_to_hub: uploading step {step} to {repo} failed ({type(error).__name__}: {cause}); "
            f"the checkpoint is kept at {checkpoint}, and training goes on")
        return None
    log(f"push_to_hub: step {step} uploaded to https://huggingface.co/{repo_id}")
    return repo_id
