"""The run directory's files: resolved config, `metrics.jsonl`, `samples.jsonl`; metrics are also
handed to the chosen loggers (trainer/loggers.py: TensorBoard, W&B). `latest_eval` is the last metrics line
that holds the held-out eval, as written (a checkpoint's model card quotes it, trainer/model_card.py).

A directory that already holds a run is never trained into by a new run: `prepare_new_run_dir`
refuses it (naming `resume=` and `overwrite=true`), or, with `overwrite=true`, removes the earlier
run's files first, so one directory never mixes two runs' metrics or checkpoints. A run exists from its
`config.yaml` on, which the trainer writes once everything the run needs is built (trainer/run.py): a
directory holding only the loggers' files of a start that failed before that (`tensorboard/`, `wandb/`)
holds no run, and a new run there removes them and goes on, so a failed start never blocks its retry.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from omegaconf import OmegaConf

from rlvr.errors import ConfigError

# what `rlvr train` writes into a run directory (besides Hydra's .hydra/ and train.log)
RUN_FILES = ("config.yaml", "metrics.jsonl", "samples.jsonl", "summary.json", "checkpoints", "tensorboard", "wandb",
             "wandb_id")
LOGGER_FILES = ("tensorboard", "wandb", "wandb_id")  # built just before config.yaml: alone, a failed start's


def run_files_in(run_dir: Path) -> list[str]:
    """The names of `RUN_FILES` present under `run_dir`: empty when it holds no run."""
    return [name for name in RUN_FILES if (Path(run_dir) / name).exists()]


def prepare_new_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Refuse a directory that holds an earlier run, unless `overwrite`: then its run files are removed."""
    found = run_files_in(run_dir)
    if not found:
        return
    if set(found) <= set(LOGGER_FILES):  # a start that failed before its config.yaml: no run to keep
        overwrite = True
    if not overwrite:
        raise ConfigError(f"output_dir={run_dir} already holds a run ({', '.join(found)}): continue it with "
                          f"resume={run_dir}, replace it with overwrite=true, or choose another output_dir")
    for name in found:  # tolerant: under torchrun every rank may clear a failed start's leftovers at once
        path = Path(run_dir) / name
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


class RunFiles:
    def __init__(self, run_dir: Path):
        self.dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = run_dir / "metrics.jsonl"
        self.samples_path = run_dir / "samples.jsonl"
        self.loggers: list = []  # set by the trainer once the run is set up (trainer/loggers.py)
        self.latest_eval: dict | None = None  # the last metrics line with held-out eval keys, as written

    def write_config(self, cfg) -> None:
        (self.dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))

    def truncate_after(self, step: int) -> None:
        """On resume, forget lines logged after the checkpoint: those steps are run again."""
        for path in (self.metrics_path, self.samples_path):
            if path.exists():
                kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= step]
                path.write_text("".join(line + "\n" for line in kept))
        self.latest_eval = next((m for m in reversed(self.read_metrics()) if _has_eval(m)), None)

    def log_metrics(self, metrics: dict) -> None:
        record = {k: _jsonable(v) for k, v in metrics.items()}
        _append(self.metrics_path, record)
        if _has_eval(record):
            self.latest_eval = record
        for logger in self.loggers:
            logger.log(metrics)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
        self.loggers = []

    def log_samples(self, samples: list[dict]) -> None:
        for sample in samples:
            _append(self.samples_path, sample)

    def read_metrics(self) -> list[dict]:
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines()]


def _has_eval(metrics: dict) -> bool:
    return any(key.startswith("eval/") for key in metrics)


def _jsonable(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _append(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")
