"""`rlvr.train(train_dataset=..., eval_dataset=...)`: rows in memory (TRL's `GRPOTrainer(train_dataset=...)`)
for `env=dataset`.

Rather than a second way into the environment, the rows become the environment's data files: each is checked
under `env.columns` with the message a file's bad row gets (envs/dataset.py `check_rows`, naming `train_dataset`
and the row), then saved with `save_to_disk` into RUN_DIR/data/train (or data/test) and named by
`env.train_file` (`env.test_file`). So the run trains on exactly what the file path reads, and its config.yaml
names data that `resume=RUN_DIR` and `rlvr eval` of the run read again. Without an `env=` the rows imply
`env=dataset`; another environment is refused by name, as is a file given beside the rows for the same split and
rows given to a resumed run (which reads its own saved copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.errors import ConfigError

ARGUMENTS = {"train_dataset": ("train", "train_file"), "eval_dataset": ("test", "test_file")}


class InMemoryData:
    """The rows given for each split, converted up front (a bad type is refused before any config is read)."""

    def __init__(self, train_dataset: Any = None, eval_dataset: Any = None):
        from rlvr.envs.dataset import in_memory_rows

        given = {"train_dataset": train_dataset, "eval_dataset": eval_dataset}
        self.rows = {arg: in_memory_rows(data, arg) for arg, data in given.items() if data is not None}

    def env_override(self, args: list[str]) -> list[str]:
        """`env=dataset` when no env is chosen among `args` (the rows are what env=dataset reads)."""
        chosen = any(a.split("=", 1)[0].lstrip("+~") == "env" for a in args)
        return [] if chosen else ["env=dataset"]

    def overrides(self, cfg) -> list[str]:
        """The run directory, as `cfg` settled it, and each split's file in it; refusals name what conflicts."""
        names = ", ".join(self.rows)
        if cfg.env.name != "dataset":
            raise ConfigError(f"{names}: rows in memory are read by env=dataset (its env.columns mapping), "
                              f"not env={cfg.env.name}; drop env={cfg.env.name} or pass the data to that "
                              f"environment's own keys")
        if cfg.resume:
            raise ConfigError(f"{names} with resume={cfg.resume}: a resumed run reads the copy it saved in "
                              f"{Path(cfg.resume) / 'data'}; drop {names}")
        out = [f"output_dir={Path(cfg.output_dir).resolve()}"]
        for arg in self.rows:
            split, key = ARGUMENTS[arg]
            if cfg.env.get(key) is not None:
                raise ConfigError(f"{arg} and env.{key}={cfg.env[key]} both give the {split} rows; give one")
            out.append(f"env.{key}={self.path(cfg, split)}")
        return out

    def check_and_save(self, cfg) -> None:
        """Each split's rows checked under the run's env config, then saved where its `env.*_file` points."""
        import datasets

        from rlvr.trainer.env_config import build_env

        env = build_env(cfg.env)  # reads no data yet: its files are the folders written below
        for arg, rows in self.rows.items():
            env.check_rows(rows, arg)
        for arg, rows in self.rows.items():
            split, _ = ARGUMENTS[arg]
            try:
                table = datasets.Dataset.from_list(rows)
            except Exception as error:  # pyarrow's many types: one column holding a number here, text there
                raise ConfigError(f"dataset: {arg} could not be stored as a table ({type(error).__name__}: "
                                  f"{error}); give each column one type") from error
            table.save_to_disk(str(self.path(cfg, split)))

    @staticmethod
    def path(cfg, split: str) -> Path:
        return Path(cfg.output_dir).resolve() / "data" / split
