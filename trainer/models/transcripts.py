"""Warm-start transcripts of a multi-turn environment as token ids with the RL loss mask.

An environment that defines `reference_trajectory(row)` (the assistant and tool messages after the prompt;
envs/tool_multiply.py) is warm-started on whole conversations rather than on `row["reference"]` alone.
Each assistant message is tokenised alone and ends with EOS (mask 1: trained on); each run of tool/user
messages between them is rendered by the agent loop's own `observation_text` and tokenised alone (mask 0),
so the warm start sees exactly the ids an RL trajectory of the same conversation holds, and, like the RL
loss, never learns to predict the environment's text.
"""

from __future__ import annotations

from rlvr.trainer.rollout.agent_loop import observation_text


def has_transcripts(env) -> bool:
    return callable(getattr(env, "reference_trajectory", None))


def transcript_ids(tokenizer, env, row: dict) -> tuple[list[int], list[int]]:
    """(completion ids, 0/1 loss mask) of `env.reference_trajectory(row)` after the rendered prompt."""
    messages = env.reference_trajectory(row)
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
