"""What `algo=sft` trains on, as token ids with the prompt masked: a file's rows, or the environment's references.

`data=FILE` (`read_sft_file`): JSONL, one example a line, in one of TRL's dataset shapes:
  {"prompt": "...", "completion": "..."}                      the prompt as one user turn
  {"prompt": [messages], "completion": [assistant message]}   conversational prompt-completion
  {"messages": [..., {"role": "assistant", "content": "..."}]} the last message (an assistant's) is the completion,
                                                              every message before it the prompt
Messages are {"role": str, "content": str}. The prompt is rendered with the model's chat template, as every rlvr
prompt is (`model.prompt_format=plain`: plain text), and the completion is tokenised alone and ends with EOS, as
the warm start's references and offline DPO's completions do. Where this departs from TRL: a multi-message
conversation trains on its last assistant message only (TRL's `assistant_only_loss` trains on every assistant
turn); earlier assistant turns are context. A bad line stops the run before any model loads, with its line number
and field (trainer/validate.py calls `read_sft_file`).

The environment's references (`reference_batch`): each row's `reference` and EOS after its rendered prompt; an
environment with tool transcripts (`reference_trajectory`, trainer/models/transcripts.py) gives whole
conversations with the environment's tokens masked. The tiny model's warm start (trainer/warm_start.py) trains on
exactly this batch.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.errors import ConfigError
from rlvr.trainer.algos.dpo_data import data_file_objects
from rlvr.trainer.models.logprobs import PackedBatch, pack
from rlvr.trainer.models.transcripts import has_transcripts, warm_start_examples
from rlvr.trainer.rollout.prompts import render_messages, render_prompts


SOURCES = ("auto", "reference", "data", "rft")


def source_of(cfg) -> str:
    """`algo.source` resolved: auto is data when data=FILE is given, else reference."""
    if cfg.algo.source == "auto":
        return "data" if cfg.data else "reference"
    return cfg.algo.source


def validate_sft(cfg) -> None:
    """algo=sft's keys and data=FILE, checked before any model loads: a bad line stops the run here."""
    algo = cfg.algo
    if algo.source not in SOURCES:
        raise ConfigError(f"algo.source={algo.source!r}; choose one of {', '.join(SOURCES)}")
    if algo.keep_per_prompt < 1:
        raise ConfigError(f"algo.keep_per_prompt={algo.keep_per_prompt} must be >= 1")
    source = source_of(cfg)
    if cfg.data and source != "data":
        raise ConfigError(f"data={cfg.data} is read by algo.source=data (or auto), not algo.source={source}")
    if source == "data":
        if not cfg.data:
            raise ConfigError("algo.source=data needs data=FILE (prompt/completion or messages rows, JSONL)")
        if not Path(cfg.data).is_file():
            raise ConfigError(f"data={cfg.data}: no such file")
        read_sft_file(cfg.data)


def reference_batch(tokenizer, env, rows: list[dict]) -> PackedBatch:
    """`rows`' rendered prompts and their references (+ EOS), packed; tool transcripts where the env has them."""
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in render_prompts(tokenizer, env, rows)]
    if has_transcripts(env):  # multi-turn: whole conversations, the environment's tokens masked out
        examples = [(p, e) for p, r in zip(prompt_ids, rows) for e in warm_start_examples(tokenizer, env, r)]
        prompt_ids = [p for p, _ in examples]
        target_ids, masks = [e[0] for _, e in examples], [e[1] for _, e in examples]
    else:
        missing = [r.get("id", i) for i, r in enumerate(rows) if not isinstance(r.get("reference"), str)]
        if missing:
            raise ConfigError(f"env={env.name}: rows {missing[:5]} have no reference completion (a string "
                              f"`reference`); train on a file instead (data=FILE) or with algo.source=rft")
        target_ids = [tokenizer(r["reference"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                      for r in rows]
        masks = None
    return pack(prompt_ids, target_ids, tokenizer.pad_token_id, loss_masks=masks)


def read_sft_file(path) -> list[tuple[list[dict], str]]:
    """`data=FILE`'s examples as (prompt messages, completion text), in file order (module docstring)."""
    examples = [_example(record, where) for _, where, record in data_file_objects(path)]
    if not examples:
        raise ConfigError(f"data={path}: no examples")
    return examples


def file_batch(tokenizer, examples: list[tuple[list[dict], str]], source: str) -> PackedBatch:
    """`examples` (from `read_sft_file`) rendered, tokenised and packed; `source` names the file in errors."""
    try:
        texts = render_messages(tokenizer, [messages for messages, _ in examples])
    except ValueError as error:
        raise ConfigError(f"data={source}: {error}") from None
    prompt_ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    target_ids = [tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                  for _, completion in examples]
    return pack(prompt_ids, target_ids, tokenizer.pad_token_id)


def _example(record: dict, where: str) -> tuple[list[dict], str]:
    if "messages" in record:
        messages = _messages(record["messages"], "messages", where)
        if len(messages) < 2 or messages[-1]["role"] != "assistant":
            raise ConfigError(f"{where}: field 'messages' must end with an assistant message after at least one "
                              f"prompt message (roles {[m['role'] for m in messages]})")
        return messages[:-1], messages[-1]["content"]
    if "prompt" not in record:
        raise ConfigError(f"{where}: field 'prompt' (or 'messages') is missing")
    if "completion" not in record:
        raise ConfigError(f"{where}: field 'completion' is missing")
    prompt, completion = record["prompt"], record["completion"]
    if isinstance(prompt, str):
        if not isinstance(completion, str):
            raise ConfigError(f"{where}: field 'completion' must be a string when 'prompt' is one, got "
                              f"{json.dumps(completion)[:60]}")
        return [{"role": "user", "content": prompt}], completion
    prompt = _messages(prompt, "prompt", where)
    completion = _messages(completion, "completion", where)
    if len(completion) != 1 or completion[0]["role"] != "assistant":
        raise ConfigError(f"{where}: field 'completion' must be one assistant message, got roles "
                          f"{[m['role'] for m in completion]}")
    return prompt, completion[0]["content"]


def _messages(value, name: str, where: str) -> list[dict]:
    if not (isinstance(value, list) and value and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in value)):
        raise ConfigError(f"{where}: field '{name}' must be a string or a non-empty list of {{role, content}} "
                          f"strings, got {json.dumps(value)[:60]}")
    return value
