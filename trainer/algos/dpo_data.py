"""The offline preference data `algo=dpo data=PATH` reads: scored completions, grouped by prompt.

One JSON object per line. Required: `prompt_id` (str or int, shared by one prompt's
completions; rlvr verify's per-record `id` is not it), `completion` (str), `reward` (number), and the
prompt as `messages` (a list of chat messages, as `rlvr eval` writes) or `prompt` (str: one user turn).
Optional: `env` (completions are grouped by (env, prompt_id); default ""), `truncated` (bool, default
false; a completion not truncated is trained with the EOS it ended with). `rlvr eval`'s
`completions.jsonl` has all of these. A bad line stops the run with its line number and field.

Its own module so that checking a config (trainer/validate.py reads the file before any model is
built, so a bad line stops the run at once) does not import the DPO step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rlvr.errors import ConfigError


def read_scored_completions(path) -> tuple[list[list[dict]], list[list[tuple[str, float, bool]]]]:
    """Per prompt (in order of first appearance): its chat messages, and its (completion, reward, truncated)."""
    index: dict[tuple, int] = {}
    first_line: list[int] = []
    prompts: list[list[dict]] = []
    completions: list[list[tuple[str, float, bool]]] = []
    for number, where, record in data_file_objects(path):
        messages = _messages_of(record, where)
        key = (str(record.get("env", "")), _field(record, "prompt_id", (str, int), where))
        text = _field(record, "completion", str, where)
        reward = _field(record, "reward", (int, float), where)
        truncated = _field(record, "truncated", bool, where) if "truncated" in record else False
        if not math.isfinite(reward):
            raise ConfigError(f"{where}: field 'reward' is {reward}; it must be a finite number")
        if key not in index:
            index[key] = len(prompts)
            first_line.append(number)
            prompts.append(messages)
            completions.append([])
        elif prompts[index[key]] != messages:
            raise ConfigError(f"{where}: prompt_id {key[1]!r} has different messages than on line "
                              f"{first_line[index[key]]}")
        completions[index[key]].append((text, float(reward), truncated))
    if not prompts:
        raise ConfigError(f"data={path}: no records")
    return prompts, completions


def data_file_objects(path):
    """(line number, "data=PATH line N", the line's JSON object) for each non-blank line of a `data=` JSONL file; a
    line that is not a JSON object stops the read naming it (scored completions here, SFT examples: sft_data.py)."""
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"data={path} line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise ConfigError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield number, where, record


def _field(record: dict, name: str, kinds, where: str):
    if name not in record:
        raise ConfigError(f"{where}: field '{name}' is missing")
    value = record[name]
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ConfigError(f"{where}: field '{name}' must be {names}, got {json.dumps(value)[:60]}")
    return value


def _messages_of(record: dict, where: str) -> list[dict]:
    if "messages" in record:
        messages = record["messages"]
        if not (isinstance(messages, list) and messages and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages)):
            raise ConfigError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} strings")
        return messages
    if "prompt" in record:
        return [{"role": "user", "content": _field(record, "prompt", str, where)}]
    raise ConfigError(f"{where}: field 'messages' (or 'prompt') is missing")
