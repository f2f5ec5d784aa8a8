"""Rendering chat messages into the model's prompt text."""

from __future__ import annotations


def render_prompts(tokenizer, env, rows: list[dict]) -> list[str]:
    """An environment's rows as prompts (see `render_messages`)."""
    return render_messages(tokenizer, [env.messages(row) for row in rows])


def prompt_lengths(tokenizer, env, rows: list[dict]) -> list[int]:
    """Token counts of `rows`' rendered prompts, as the engines are given them (what fits a model's context)."""
    return [len(ids) for ids in tokenizer(render_prompts(tokenizer, env, rows), add_special_tokens=False)["input_ids"]]


def render_messages(tokenizer, conversations: list[list[dict]]) -> list[str]:
    """The chat template with the assistant turn opened, so generation starts the answer."""
    if tokenizer.chat_template is None:
        raise ValueError(
            f"tokenizer of {tokenizer.name_or_path!r} has no chat template; rlvr renders prompts as chat messages"
        )
    return [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in conversations]
