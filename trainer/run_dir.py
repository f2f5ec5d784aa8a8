"""The run directory's files: resolved config, `metrics.jsonl`, `samples.jsonl`; metrics are also
handed to the chosen loggers (trainer/loggers.py: TensorBoard, W&B)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from omegaconf import OmegaConf


class RunFiles:
    def __init__(self, run_dir: Path):
        self.dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = run_dir / "metrics.jsonl"
        self.samples_path = run_dir / "samples.jsonl"
        self.loggers: list = []  # set by the trainer once the run is set up (trainer/loggers.py)

    def write_config(self, cfg) -> None:
        (self.dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))

    def truncate_after(self, step: int) -> None:
        """On resume, forget lines logged after the checkpoint: those steps are run again."""
        for path in (self.metrics_path, self.samples_path):
            if path.exists():
                kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= step]
                path.write_text("".join(line + "\n" for line in kept))

    def log_metrics(self, metrics: dict) -> None:
        _append(self.metrics_path, {k: _jsonable(v) for k, v in metrics.items()})
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


def _jsonable(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _append(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")
