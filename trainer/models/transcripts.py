"""Warm-start transcripts of a multi-turn environment as token ids with the RL loss mask.

An environment that defines `reference_trajectory(row)` (the assistant and tool messages after the prompt;
envs/tool_multiply.py) is warm-started on whole conversations rather than on `row["reference"]` alone.
Each assistant message is tokenised alone and ends with EOS (mask 1: trained on); each run of tool/user
messages between them is rendered by the agent loop's own `observation_text` and tokenised alone (mask 0),
so the warm start sees exactly the ids an RL trajectory of the same conversation holds, and, like the RL
loss, never learns to predict the environment's text.

An environment may also give `reference_mechanics(row)`: a second transcript of the row (tool_multiply: the tool
call of a row whose reference answers directly) trained on all but its first token. The first token is the
choice between the two, which `reference_trajectory` alone teaches; the rest is how to carry the call out.
"""

from __future__ import annotations

import torch

from rlvr.trainer.models.logprobs import pack
from rlvr.trainer.rollout.agent_loop import observation_text


def has_transcripts(env) -> bool:
    return callable(getattr(env, "reference_trajectory", None))


def warm_start_examples(tokenizer, env, row: dict) -> list[tuple[list[int], list[int]]]:
    """The (ids, mask) the warm start trains on for `row`: its reference transcript, then its mechanics transcript
    with the first token masked out when the environment gives one (module docstring)."""
    examples = [transcript_ids(tokenizer, env, row)]
    mechanics = getattr(env, "reference_mechanics", None)
    messages = mechanics(row) if callable(mechanics) else None
    if messages:
        ids, mask = transcript_ids(tokenizer, env, row, messages)
        examples.append((ids, [0] + mask[1:]))
    return examples


def transcript_ids(tokenizer, env, row: dict, messages: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """(completion ids, 0/1 loss mask) of `messages` (default `env.reference_trajectory(row)`) after the rendered
    prompt."""
    messages = env.reference_trajectory(row) if messages is None else messages
    if not messages or messages[0]["role"] != "assistant" or messages[-1]["role"] != "assistant":
        raise ValueError(f"{env.name}: reference_trajectory of row {row.get('id')!r} must start and end with an "
                         f"assistant message, got roles {[m['role'] for m in messages]}")
    tools = list(getattr(env, "tools", [])) or None
    ids: list[int] = []
    mask: list[int] = []
    pending: list[dict] = []  # the environment's messages since the last assistant message
    for message in messages:
        if message["role"] != "assistant":
            pending.append(message)
            continue
        if pending:  # the previous assistant message ended with EOS, as a sampled turn does
            obs = tokenizer(observation_text(tokenizer, pending, tools, ended_with_eos=True),
                            add_special_tokens=False)["input_ids"]
            ids, mask, pending = ids + obs, mask + [0] * len(obs), []
        turn = tokenizer(message["content"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids, mask = ids + turn, mask + [1] * len(turn)
    return ids, mask


def tool_transcripts(tokenizer, env, rows: list[dict]) -> list[tuple[dict, tuple[list[int], list[int]]]]:
    """(row, (ids, mask)) of each warm-start example of `rows` that holds environment messages (a tool call and
    its output), the mask now 1 on every assistant token, the first one included."""
    pairs = []
    for row in rows:
        for ids, mask in warm_start_examples(tokenizer, env, row):
            if 0 in mask[1:]:
                pairs.append((row, (ids, [1] + mask[1:])))
    return pairs


def transcript_accuracy(model, prompt_ids: list[list[int]], transcripts: list[tuple[list[int], list[int]]],
                        pad_id: int) -> float:
    """Share of `transcripts` whose trained tokens, all but the first, are each the model's most likely next token
    under teacher forcing: the call's code, the EOS after it and the answer copied from the tool's output. The first
    token is left out because it is the choice between calling the tool and answering directly, which the warm
    start leaves to sampling (`reference_tool_fraction`); everything after it is mechanics a tool call needs."""
    ids, masks = map(list, zip(*transcripts))
    batch = pack(prompt_ids, ids, pad_id, loss_masks=masks)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1]  # [N, L-1, V]
    hits = logits.argmax(-1) == batch.input_ids[:, 1:]  # [N, L-1]
    exact = 0
    for row in range(len(ids)):
        trained = batch.completion_mask[row].nonzero().flatten()[1:]  # [M-1]: all but the choice token
        exact += bool(hits[row, trained].all())
    return exact / len(ids)
