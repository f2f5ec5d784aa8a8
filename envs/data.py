"""Rows from data files or the Hugging Face Hub, loaded with `datasets`, for data-backed environments.

A source is a local file (`.jsonl`, `.json`, `.parquet`, loaded with `load_dataset("json" |
"parquet", data_files=...)`), a folder written by `Dataset.save_to_disk` (a `DatasetDict`'s folder gives
the split asked for: train or test), or a Hub dataset name (needs a network, never used in tests). Every
row must have the fields the environment names; a missing or null field stops the load with the
field's name, the row's number (1-based: the line of a JSONL file) and the source.

`DataEnv` is the shared base of gsm8k, math and code_stdio: one source per split, loaded on first
use (so `rlvr envs` can list an environment whose data lives on the Hub without fetching it), then
train rows are served in a fresh seed-shuffled order each pass and test rows are distinct.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rlvr.envs.base import Env
from rlvr.errors import ConfigError

class RowError(ValueError):
    """A row's content is unusable; DataEnv adds the row number and source."""


FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def load_rows(source: str, fields: Sequence[str], env: str, *, split: str = "train",
              hub_config: str | None = None) -> list[dict[str, Any]]:
    """Rows of a local file, of a `save_to_disk` folder, or of a Hub dataset's `split`; ConfigError naming a
    missing field and its row."""
    try:
        import datasets
    except ModuleNotFoundError as error:
        raise ConfigError(f"{env}: loading data needs the `datasets` package; pip install datasets") from error
    datasets.disable_progress_bars()
    cache_dir = os.environ.get("RLVR_CACHE")
    kwargs = {"cache_dir": str(Path(cache_dir) / "datasets")} if cache_dir else {}
    path = Path(os.path.expanduser(source))
    builder = FILE_BUILDERS.get(path.suffix.lower())
    try:
        if path.is_dir():
            table = _from_disk(datasets, path, source, split, env)
        elif builder is not None:
            if not path.is_file():
                raise ConfigError(f"{env}: data file {source} does not exist")
            table = datasets.load_dataset(builder, data_files=str(path), split="train", **kwargs)
        else:
            table = datasets.load_dataset(source, hub_config, split=split, **kwargs)
    except ConfigError:
        raise
    except Exception as error:  # datasets raises many types; the message names the source either way
        if path.suffix.lower() == ".jsonl" and path.is_file():
            _refuse_a_bad_line(path, source, env)  # pyarrow's message has no line number a user can go to
        raise ConfigError(f"{env}: could not load {source!r} ({type(error).__name__}: {error})") from error
    missing = [f for f in fields if f not in table.column_names]
    rows = table.to_list()
    if missing and rows:
        raise ConfigError(f"{env}: row 1 of {source} has no field {missing[0]!r} (fields: {', '.join(table.column_names)})")
    for i, row in enumerate(rows, start=1):
        for field in fields:
            if row.get(field) is None:  # JSONL rows that lack a key another row has are loaded as null
                raise ConfigError(f"{env}: row {i} of {source} has no field {field!r}")
    return rows


def _refuse_a_bad_line(path: Path, source: str, env: str) -> None:
    """ConfigError naming the first line of a JSONL file that is not one JSON object (blank lines pass)."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{env}: {source} line {number} is not JSON ({error.msg}, column {error.colno}): "
                                  f"{line.strip()[:60]!r}") from None
            if not isinstance(value, dict):
                raise ConfigError(f"{env}: {source} line {number} is a JSON {type(value).__name__}, not an object "
                                  f"with the fields: {line.strip()[:60]!r}")


def _from_disk(datasets, path: Path, source: str, split: str, env: str):
    """A folder of `save_to_disk`: a Dataset, or a DatasetDict's `split`."""
    if not (path / "state.json").is_file() and not (path / "dataset_dict.json").is_file():
        raise ConfigError(f"{env}: {source} is a folder but not one written by datasets' save_to_disk "
                          f"(no state.json or dataset_dict.json)")
    table = datasets.load_from_disk(str(path))
    if isinstance(table, datasets.DatasetDict):
        if split not in table:
            raise ConfigError(f"{env}: {source} holds the splits {', '.join(table)}, not {split!r}")
        table = table[split]
    return table


def take(items: Sequence[Any], split: str, n: int, seed: int, env: str) -> list[Any]:
    """`n` items: test = distinct, seed-shuffled; train = every item once per pass, a new order each pass."""
    if not items:
        raise ValueError(f"{env}: the {split} data has no rows")
    if split != "train":
        if n > len(items):
            raise ValueError(f"{env}: asked for {n} {split} rows but only {len(items)} exist")
        order = list(range(len(items)))
        random.Random(f"{split}-{seed}").shuffle(order)
        return [items[i] for i in order[:n]]
    rng, picked = random.Random(f"train-{seed}"), []
    while len(picked) < n:
        order = list(range(len(items)))
        rng.shuffle(order)
        picked.extend(order[:n - len(picked)])
    return [items[i] for i in picked]


def stable_id(env: str, text: str) -> str:
    """An id that follows the problem's text, not its position in a file."""
    return f"{env}/{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def check_template(env: str, template: str, **example: Any) -> str:
    try:
        template.format(**example)
    except (KeyError, IndexError, ValueError, AttributeError) as error:
        raise ConfigError(f"{env}: 'prompt_template' {template!r} does not format with {', '.join(example)}: {error!r}") from error
    return template


class DataEnv(Env):
    """An environment whose problems come from one data source per split (see the module docstring).

    Subclasses set `required_fields` and implement `_row(raw)` (raising RowError for a bad row).
    Sources: `train_file` / `test_file` (local paths); when neither is given, `hub` (a Hub dataset
    name, with `hub_config`), whose splits are `hub_splits[split]`.
    """

    required_fields: ClassVar[tuple[str, ...]] = ()
    hub_splits: ClassVar[dict[str, str]] = {"train": "train", "test": "test"}
    procedural: ClassVar[bool] = False

    def __init__(self, *, train_file: str | None = None, test_file: str | None = None, hub: str | None = None,
                 hub_config: str | None = None, reward: list[dict] | None = None, system_prompt: str | None = None):
        for key, value in (("train_file", train_file), ("test_file", test_file), ("hub", hub), ("hub_config", hub_config)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{self.name}: {key!r} must be a string or null, got {value!r}")
        if train_file is not None or test_file is not None:
            hub = None  # local files given: a split without one is an error, never a silent download
        self.sources = {"train": train_file or hub, "test": test_file or hub}
        self.from_file = {"train": train_file is not None, "test": test_file is not None}
        self.hub_config = hub_config
        self._cache: dict[str, list[dict]] = {}
        super().__init__(reward=reward, system_prompt=system_prompt)

    @property
    def data_source(self) -> str:
        return ", ".join(f"{s}={src}" for s, src in self.sources.items() if src) or "train_file/test_file, not set"

    @property
    def num_rows(self) -> int | None:
        """Row count once loaded (None before: `rlvr envs` does not fetch Hub data to count it)."""
        return sum(len(v) for v in self._cache.values()) if self._cache else None

    def test_size(self) -> int:
        return len(self.problems("test"))

    def problems(self, split: str) -> list[dict]:
        """Every row of `split`, converted by `_row`, loaded once."""
        if split not in self._cache:
            source = self.sources.get(split)
            if source is None:
                raise ValueError(f"{self.name}: no {split} data; set '{split}_file' (or 'hub')")
            raw = load_rows(source, self.required_fields, self.name, split=self.hub_splits[split],
                            hub_config=None if self.from_file[split] else self.hub_config)
            kept = []
            for i, r in enumerate(raw, start=1):
                try:
                    if self._keep(r):
                        kept.append(self._row(r))
                except RowError as error:
                    raise ConfigError(f"{self.name}: row {i} of {source}: {error}") from None
            self._cache[split] = kept
        return self._cache[split]

    def rows(self, split: str, n: int, seed: int = 0) -> list[dict]:
        self.check_rows_args(split, n)
        return [dict(r) for r in take(self.problems(split), split, n, seed, self.name)]

    def _keep(self, raw: dict[str, Any]) -> bool:
        """Whether a raw row is used (filters such as MATH's level and subject)."""
        return True

    def _row(self, raw: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError
