"""The run directory's files: resolved config, `metrics.jsonl`, `samples.jsonl`; metrics are also
handed to the chosen loggers (trainer/loggers.py: TensorBoard, W&B). `latest_eval` is the last metrics line
that holds the held-out eval, as written (a checkpoint's model card quotes it, trainer/model_card.py).

A directory that already holds a run is never trained into by a new run: `prepare_new_run_dir`
refuses it (naming `resume=` and `overwrite=true`), or, with `overwrite=true`, removes the earlier
run's files first, so one directory never mixes two runs' metrics or checkpoints. A run exists from its
`config.yaml` on, which the trainer writes once everything the run needs is built (trainer/run.py): a
directory holding only the loggers' files of a start that failed before that (`tensorboard/`, `wandb/`)
holds no run, and a new run there removes them and goes on, so a failed start never blocks its retry.

`rlvr train` and `rlvr.train()` settle the directory from the command line before Hydra creates it
(`settle_run_dir`), write the run's log to its train.log (`tee_log`), and on Ctrl-C or SIGTERM (`stop_on_sigterm`)
name the last checkpoint and the command that continues the run from it (`interrupted_message`). Whatever stops a
run (a failed reward, a refusal, Ctrl-C, an error) ends its train.log with the line the console printed
(`stop_line`, `log_stop`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import OmegaConf

from rlvr.errors import ConfigError
from rlvr.verifiers.batch import jsonl_line

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
        """Strict JSON, as `rlvr verify` writes its records (`jsonl_line`): a NaN reward or detail is the string
        "NaN", not the bare NaN that json.dumps writes and strict readers (jq, JSON.parse) refuse. Each completion
        goes through it on its own, so details JSON has no form for are replaced by a note in that completion
        alone, not the whole sample."""
        with self.samples_path.open("a") as f:
            for sample in samples:
                if isinstance(sample.get("completions"), list):
                    sample = {**sample, "completions": [json.loads(jsonl_line(c)) for c in sample["completions"]]}
                f.write(jsonl_line(sample))

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


def settle_run_dir(overrides: list[str]) -> list[str]:
    """Settle the run directory before Hydra creates it (Hydra writes .hydra/ and train.log there first).

    `resume=DIR` trains in DIR (never a fresh outputs/<date>/<time>/) and leaves DIR/.hydra as the run's
    first session wrote it; a new run's `output_dir=DIR` that holds a run is refused here, unless
    `overwrite=true`, before anything in it is touched (`prepare_new_run_dir`). A refusal is a ConfigError.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - Hydra reports a malformed override itself, in its own words
        return overrides
    given = {o.key_or_group: o for o in parsed if not o.is_delete() and not o.is_sweep_override()}
    value = {key: o.value() for key, o in given.items()}
    resume, output_dir = value.get("resume"), value.get("output_dir")
    if resume:
        if not Path(str(resume)).is_dir():
            raise ConfigError(f"resume={resume}: no such directory; give the run directory to continue")
        if output_dir is not None and Path(str(output_dir)).resolve() != Path(str(resume)).resolve():
            raise ConfigError(f"resume={resume} continues the run in its own directory; drop "
                             f"output_dir={output_dir} (or start a new run there without resume=)")
        raw_resume = given["resume"].get_value_string()
        return [*overrides, *([] if output_dir is not None else [f"output_dir={raw_resume}"]),
                "hydra.output_subdir=null"]
    if output_dir is not None and value.get("overwrite") is not True:
        prepare_new_run_dir(Path(str(output_dir)), overwrite=False)
    return overrides


class Terminated(KeyboardInterrupt):
    """SIGTERM (a preempted job, `kill PID`), raised in the main thread as Ctrl-C raises KeyboardInterrupt, so the run
    stops through the same paths (the producer thread and the reward workers stop, the command prints where the
    last checkpoint is) instead of dying with no word."""


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """SIGTERM raises `Terminated` while the block runs (the main thread only: a handler can be set nowhere else)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_message(cfg, trace, error: BaseException | None = None) -> str:
    """Ctrl-C: two lines instead of a traceback: where it stopped and the command that continues the run.
    SIGTERM (`error` a Terminated): one line, that the run was stopped and where its last checkpoint is."""
    import traceback

    from rlvr.trainer.checkpoint import latest_checkpoint

    frames = traceback.extract_tb(trace)[1:]  # from train() down to where the interrupt landed
    where = " > ".join(f"{Path(f.filename).name}:{f.name}" for f in frames)
    run_dir = Path(cfg.resume or cfg.output_dir)
    checkpoint = latest_checkpoint(run_dir) if run_dir.is_dir() else None
    if checkpoint is None:
        then = (f"no checkpoint was saved yet (train.save_every={cfg.train.save_every}); start again with "
                f"overwrite=true or another output_dir")
    else:
        then = (f"continue from {checkpoint.name} with `rlvr train resume={run_dir}` (steps after it are run "
                f"again)")
    if isinstance(error, Terminated):
        saved = f"its last checkpoint is {checkpoint}" if checkpoint is not None else "it saved no checkpoint"
        return f"rlvr train: stopped by SIGTERM; {saved}: {then}"
    return f"rlvr train: interrupted (KeyboardInterrupt); {then}\n  in {where}"


def tee_log(path: Path):
    """The run's log: printed, and appended to RUN_DIR/train.log (Hydra creates the file; the run writes it)."""
    def log(*args, **kwargs) -> None:
        print(*args, **kwargs)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            print(*args, file=f)

    return log


def stop_line(cfg, error: BaseException, trace) -> str:
    """Why the run stopped, as the console says it: a refusal or a failed reward (`RewardFailed`) as the command's
    one line, Ctrl-C and SIGTERM as `interrupted_message`, anything else by its type and message (its traceback
    stays on the console)."""
    from rlvr.errors import UnknownNameError

    if isinstance(error, KeyboardInterrupt):
        return interrupted_message(cfg, trace, error)
    if isinstance(error, (ConfigError, UnknownNameError)):
        return f"rlvr train: {error}"
    return f"rlvr train: stopped by {type(error).__name__}: {error} (the traceback is on the console)"


def log_stop(path: Path, line: str) -> None:
    """Append why the run stopped to its train.log, the file a user reads afterwards (the console has said it).
    Rank 0 alone, as the run's log (trainer/setup.py): a torchrun's other ranks would repeat the line. Only into a
    log that exists (Hydra's, or one the run has written): a config refused before the run had a directory leaves
    no directory behind for its one console line."""
    if int(os.environ.get("RANK", "0")) != 0 or not path.is_file():
        return
    with open(path, "a") as f:
        print(line, file=f)
