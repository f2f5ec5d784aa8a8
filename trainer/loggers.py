"""Where metrics go besides `metrics.jsonl`: TensorBoard and Weights & Biases, chosen with
`logger=[tensorboard,wandb]` (docs/concepts/run-directory.md). The JSONL file is always written and
stays the record `rlvr` itself reads (summary, resume, `rlvr eval`); these are views of it.

* `tensorboard` writes event files to `RUN_DIR/tensorboard/` (`tensorboard --logdir RUN_DIR`).
  On resume the writer purges events logged after the checkpoint, as `metrics.jsonl` drops its
  lines, so each step appears once.
* `wandb` runs offline unless `wandb.mode=online` (offline needs no network and no account;
  `wandb sync RUN_DIR/wandb/offline-run-*` uploads later). Its files go under `RUN_DIR/wandb/`.
  The run id is kept in `RUN_DIR/wandb_id`, so a resumed run continues the same W&B run.

Both import their package only when chosen; a missing one is a ConfigError naming the extra.
"""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path

from rlvr.errors import ConfigError

LOGGERS = ("tensorboard", "wandb")


class TensorBoardLogger:
    def __init__(self, run_dir: Path, resume_step: int | None):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError("logger=tensorboard needs the tensorboard package: pip install 'rlvr[tensorboard]'") from None
        # purge_step drops events at or after it that an earlier, killed session wrote
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"),
                                    purge_step=None if resume_step is None else resume_step + 1)

    def log(self, metrics: dict) -> None:
        step = metrics["step"]
        for name, value in _scalars(metrics):
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    def __init__(self, run_dir: Path, config: dict, wandb_cfg, resume_step: int | None):
        try:
            import wandb
        except ImportError:
            raise ConfigError("logger=wandb needs the wandb package: pip install 'rlvr[wandb]'") from None
        id_file = run_dir / "wandb_id"
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:8]
        id_file.write_text(run_id + "\n")
        self.run = wandb.init(project=wandb_cfg.project, entity=wandb_cfg.entity, mode=wandb_cfg.mode,
                              dir=str(run_dir), id=run_id, name=run_dir.name, config=config,
                              resume="allow" if resume_step is not None else None,
                              settings=wandb.Settings(silent=True, console="off"))
        self.resume_step = resume_step

    def log(self, metrics: dict) -> None:
        self.run.log(dict(_scalars(metrics)), step=metrics["step"])

    def close(self) -> None:
        self.run.finish()


def build_loggers(names, run_dir: Path, config: dict, wandb_cfg, resume_step: int | None = None) -> list:
    """One logger per name in `names` (validated by trainer/validate.py)."""
    loggers = []
    for name in names:
        if name == "tensorboard":
            loggers.append(TensorBoardLogger(run_dir, resume_step))
        elif name == "wandb":
            os.environ.setdefault("WANDB_SILENT", "true")
            loggers.append(WandbLogger(run_dir, config, wandb_cfg, resume_step))
        else:
            raise ConfigError(f"logger: unknown logger {name!r}; expected some of {list(LOGGERS)}")
    return loggers


def _scalars(metrics: dict):
    """(name, float) for every finite number in `metrics` except the step itself."""
    for name, value in metrics.items():
        if name == "step" or isinstance(value, bool):
            continue
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, (int, float)) and math.isfinite(value):
            yield name, float(value)
