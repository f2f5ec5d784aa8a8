"""`env=dataset`: your own data under any column names, scored by rlvr's verifiers or by your own Python reward.

    rlvr train env=dataset env.train_file=data.jsonl env.columns.prompt=question env.columns.answer=solution

Data: `train_file` / `test_file`: JSONL, JSON, Parquet, or a folder written by `datasets`' `save_to_disk` (a
DatasetDict's folder gives its train split to `train_file` and its test split to `test_file`: name it in both);
or `hub`, a Hub dataset name (needs a network). Without a test source, the test split is carved from the train
rows: the ceil(test_fraction x rows) rows whose ids hash lowest (an id follows the row's content), so a row keeps
its split however often the file is read, and the splits never share a row.

Columns (`columns`: the data's column name for each; null: none):
    prompt     required. A string, the user turn (formatted into `prompt_template` when one is set), or a list of
               {role, content} chat messages (TRL's conversational format)
    answer     the gold answer, read by the math and exact verifiers (default `answer`; required only when the
               reward reads it, else used when present)
    system     a per-row system prompt, put before the prompt (a null in a row: none for that row); a row's own
               system message takes the place of `system_prompt`
    tests      tests for the code verifier, as `rlvr verify` takes them: a {kind: stdio|assert|call, ...} object,
               or a list of {stdin, stdout} cases (either may be a JSON string, as Parquet files often hold them)
    reference  a completion the reward scores as correct, for the tiny model's warm start (default
               `<answer>ANSWER</answer>`)
    id         a unique id per row (default: a hash of the row's content)
A mapped column missing from a row stops the load with one line naming the column, its `env.columns` key, the
row's number and the file.

Rows in memory (`rlvr.train(train_dataset=..., eval_dataset=...)`, trainer/data_args.py): a `datasets.Dataset` or a
list of dicts, checked row by row under the same mapping with the same message (`row 3 of train_dataset: ...`,
`check_rows`), then saved into the run directory with `save_to_disk` and read from there as a file is, so the
run's config.yaml names real data that `resume=` and `rlvr eval` of the run read again.

Records: a row is the record the verifiers read: every column of the data under its own name (so a plugin's
verifier finds its fields), then rlvr's `id`, `messages`, `answer`, `reference` and `tests`, plus `prompt` (the
data's prompt as it is) and `columns` (the data's row without the prompt), which `verifier=python` hands to your
function as TRL's `GRPOTrainer` hands it the dataset's columns (verifiers/python/verifier.py).

Reward: `math` on the answer, or `code` on the tests when a tests column is mapped (run in the sandbox named by
`backend`); `reward` for anything else, e.g. `[{verifier: python, params: {function: "my_rewards:accuracy"}}]`,
alone or weighted with rlvr's verifiers.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from rlvr.envs.code_stdio import stdio_cases
from rlvr.envs.data import DataEnv, RowError, check_template, stable_id
from rlvr.envs.registry import register_env
from rlvr.envs.split import check_fraction
from rlvr.errors import ConfigError
from rlvr.sandboxes.factory import BACKENDS
from rlvr.verifiers.registry import RECORD_FIELDS

COLUMNS = {"prompt": "prompt", "answer": "answer", "system": None, "tests": None, "reference": None, "id": None}


def check_columns(columns: Any) -> dict[str, str | None]:
    """`columns` over the defaults, or a ConfigError naming the bad key."""
    if columns is None:
        columns = {}
    if not isinstance(columns, Mapping):
        raise ConfigError(f"dataset: 'columns' must map {', '.join(COLUMNS)} to column names, got {columns!r}")
    for key, value in columns.items():
        if key not in COLUMNS:
            raise ConfigError(f"dataset: env.columns has no key {key!r} (keys: {', '.join(COLUMNS)})")
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"dataset: env.columns.{key} must be a column name or null, got {value!r}")
    merged = {**COLUMNS, **columns}
    if merged["prompt"] is None:
        raise ConfigError("dataset: env.columns.prompt must name the column that holds the prompt")
    return merged


def in_memory_rows(data: Any, argument: str) -> list[dict]:
    """A `datasets.Dataset` or a list of dicts as a list of dicts; TypeError naming what else was given (a
    DatasetDict: which split), ConfigError naming a row that is not a mapping or an empty list."""
    try:
        import datasets
    except ModuleNotFoundError:
        datasets = None
    if datasets is not None and isinstance(data, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        raise TypeError(f"{argument}: a DatasetDict holds the splits {', '.join(data)}; "
                        f"give one: {argument}=ds['train']")
    if datasets is not None and isinstance(data, datasets.Dataset):
        rows = data.to_list()
    elif isinstance(data, (list, tuple)):
        rows = list(data)
    else:
        raise TypeError(f"{argument}: a datasets.Dataset or a list of dicts, got {type(data).__name__}")
    if not rows:
        raise ConfigError(f"dataset: {argument} has no rows")
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise ConfigError(f"dataset: row {i} of {argument}: a {type(row).__name__}, not a mapping of column "
                              f"names to values")
    return [dict(r) for r in rows]


def as_text(value: Any) -> str:
    """An answer as the verifiers read it: a number as its digits, a list or mapping as JSON, none as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


@register_env("dataset")
class DatasetEnv(DataEnv):
    """Rows of a local file (or folder, or Hub dataset) under a column mapping; see the module docstring."""

    name: ClassVar[str] = "dataset"
    default_max_new_tokens: ClassVar[int] = 512  # reasoning then an answer, as gsm8k's
    truncated_reward: ClassVar[str] = "zero"

    def __init__(self, *, train_file: str | None = None, test_file: str | None = None,
                 columns: Mapping[str, str | None] | None = None, test_fraction: float = 0.1,
                 prompt_template: str | None = None, backend: str = "docker", reward: list[dict] | None = None,
                 system_prompt: str | None = None, hub: str | None = None, hub_config: str | None = None):
        self.columns = check_columns(columns)
        self.test_fraction = check_fraction(test_fraction, "dataset")
        self.prompt_template = None if prompt_template is None else check_template("dataset", prompt_template,
                                                                                   prompt="1+1?")
        if backend not in BACKENDS:
            raise ConfigError(f"dataset: 'backend' must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if reward is None:
            reward = ([{"verifier": "code", "params": {"backend": backend}}] if self.columns["tests"]
                      else [{"verifier": "math"}])
        self.reads = self._fields_read(reward)
        super().__init__(train_file=train_file, test_file=test_file, hub=hub, hub_config=hub_config,
                         reward=reward, system_prompt=system_prompt)
        self.carve = self.sources["test"] is None and self.sources["train"] is not None

    def _fields_read(self, reward: Any) -> set[str]:
        """The record fields the reward's built-in verifiers read; one this env fills from a column that is not
        mapped is a ConfigError now (the verifier would score every completion as an error)."""
        reads = set()
        for entry in reward if isinstance(reward, (list, tuple)) else []:
            verifier = entry.get("verifier") if isinstance(entry, Mapping) else None
            for field in RECORD_FIELDS.get(verifier, ()) if isinstance(verifier, str) else ():
                if field in ("answer", "tests") and self.columns[field] is None:
                    raise ConfigError(f"dataset: the {verifier} verifier reads the {field}; map the column that "
                                      f"holds it: env.columns.{field}=COLUMN")
                reads.add(field)
        return reads

    def problems(self, split: str) -> list[dict]:
        if self.carve and "test" not in self._cache:
            rows = super().problems("train")
            ids = sorted({r["id"] for r in rows}, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
            held = set(ids[:math.ceil(self.test_fraction * len(ids))])
            train = [r for r in rows if r["id"] not in held]
            if not train:
                raise ConfigError(f"dataset: {self.sources['train']} has {len(ids)} distinct row(s) and "
                                  f"test_fraction={self.test_fraction} holds back all of them; set env.test_file")
            self._cache["train"], self._cache["test"] = train, [r for r in rows if r["id"] in held]
        if self.carve and split == "test" and not self._cache["test"]:
            raise ValueError("dataset: no test rows: env.test_fraction=0 holds none of the train rows back; "
                             "set env.test_file or env.test_fraction > 0")
        return super().problems(split)

    def check_rows(self, rows: list[dict], source: str) -> None:
        """Each row through the column mapping, as a file's are on load: a ConfigError with the same message
        (`row N of SOURCE: ...`) for the first bad one."""
        for i, raw in enumerate(rows, start=1):
            try:
                self._row(raw)
            except RowError as error:
                raise ConfigError(f"{self.name}: row {i} of {source}: {error}") from None

    def messages(self, row: dict) -> list[dict]:
        """The row's messages; `system_prompt` first unless the row has a system message of its own."""
        if row["messages"] and row["messages"][0].get("role") == "system":
            return [dict(m) for m in row["messages"]]
        return super().messages(row)

    def _row(self, raw: dict[str, Any]) -> dict[str, Any]:
        prompt = self._column(raw, "prompt")
        answer = as_text(self._column(raw, "answer", required="answer" in self.reads))
        tests = self._column(raw, "tests")
        reference = self._column(raw, "reference")
        row_id = self._column(raw, "id")
        data = {k: v for k, v in raw.items() if k != self.columns["prompt"]}
        row = {
            **data,
            "id": str(row_id) if row_id is not None else stable_id("dataset", json.dumps(raw, sort_keys=True,
                                                                                         default=str)),
            "messages": self._messages(prompt, self._column(raw, "system")),
            "answer": answer,
            "reference": str(reference) if reference is not None else f"<answer>{answer}</answer>" if answer else "",
            "prompt": prompt,
            "columns": data,
        }
        if tests is not None:
            row["tests"] = self._tests(tests)
        return row

    def _column(self, raw: dict[str, Any], key: str, required: bool = True) -> Any:
        """The value of the column mapped to `key` (None when none is mapped, or when a column that is not
        `required` is absent or null); RowError naming the column when a required one is. A system column may
        hold nulls (no system message for that row), but it must exist."""
        name = self.columns[key]
        if name is None:
            return None
        if name not in raw or raw[name] is None:
            if required and (name not in raw or key != "system"):
                held = [c for c, v in raw.items() if v is not None]  # a file's other rows' keys are nulls here
                raise RowError(f"has no column {name!r} (env.columns.{key}); its columns: {', '.join(held) or 'none'}")
            return None
        return raw[name]

    def _messages(self, prompt: Any, system: Any) -> list[dict]:
        column = self.columns["prompt"]
        if isinstance(prompt, str):
            messages = [{"role": "user", "content": self.prompt_template.format(prompt=prompt)
                         if self.prompt_template else prompt}]
        elif isinstance(prompt, (list, tuple)) and prompt and all(
                isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in prompt):
            if self.prompt_template is not None:
                raise RowError(f"column {column!r} holds chat messages; 'prompt_template' applies to string prompts")
            messages = [{k: v for k, v in m.items() if v is not None} for m in prompt]  # Arrow's nulls for absent keys
        else:
            raise RowError(f"column {column!r} (env.columns.prompt) must hold a string or a list of {{role, content}} "
                           f"messages, got {prompt!r:.80}")
        if system is not None:
            if not isinstance(system, str):
                raise RowError(f"column {self.columns['system']!r} (env.columns.system) must hold a string, "
                               f"got {system!r:.80}")
            messages.insert(0, {"role": "system", "content": system})
        return messages

    def _tests(self, tests: Any) -> dict:
        column = self.columns["tests"]
        if isinstance(tests, str):
            try:
                tests = json.loads(tests)
            except ValueError as error:
                raise RowError(f"column {column!r} (env.columns.tests) is a string but not JSON: {error}") from None
        if isinstance(tests, Mapping) and "kind" in tests:
            return {k: v for k, v in tests.items() if v is not None}  # Arrow's nulls for keys other rows have
        try:
            return {"kind": "stdio", "cases": stdio_cases(tests)}
        except RowError as error:
            raise RowError(f"column {column!r} (env.columns.tests): {error}; or give a {{kind: stdio|assert|call, "
                           f"...}} object") from None
