"""The multi-turn agent loop: token ids in, token ids out, never a re-tokenised turn.

For each of B rows x G samples a trajectory starts from the rendered prompt's ids. Each turn hands
every unfinished trajectory's ids to the engine's `generate_ids` (one batched call, n=1 each), keeps
the sampled ids and their logprobs exactly as returned (loss mask 1), gives the decoded text to the
environment's `step`, and appends only the reply's tokens (loss mask 0). The trainer then packs
prompt + everything after it, and the mask keeps the environment's tokens out of every loss.

Why this layout (the drift it avoids: verl, SkyRL and prime-rl each have issues where the trained
ids differ from the sampled ones, because earlier turns were re-rendered through a chat template
such as Qwen3's, which drops earlier `<think>` blocks): the conversation is rendered as text once,
for the first prompt; after that, an observation is rendered alone by `observation_text` and
tokenised alone. SkyRL's `get_response_ids_and_loss_mask_from_messages` and verl's agent loop
(`ToolAgentLoop`, which tokenises `apply_chat_template(tool messages)` and removes a fixed system
prefix) do the same; the code here is written from their description, not copied.

Choices: a trajectory ends at the environment's `done`, at `env.max_turns` assistant messages, at
`env.max_total_tokens` or the model's context, whichever is smaller (the engine's `context_length`;
a turn gets only the room left, an observation that would not fit is not appended) or at a turn cut by `max_new_tokens` without EOS; `truncated` is set for the last two,
so `rollout.truncated_reward` treats them as one-turn truncations. Environment steps of one turn run
in a thread pool (a sandboxed tool call waits on Docker, not on this process).

Tested on both engines (tests/trainer/rollout/test_multi_turn.py for HF, tests/trainer/models/test_multi_turn_vllm.py for vLLM).
Not done yet: per-prompt sampling seeds (`rollout.seed_per_prompt` is ignored here: each turn calls
the engine with `seeds=None`, so vLLM's trajectories do not repeat across world sizes or a resume);
a run under torchrun (each rank runs its own trajectories; no test covers it). Per-turn rewards are
collected here (`turn_rewards`) and added to the trajectory's reward by the env (`add_turn_rewards`).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import torch

from rlvr.envs.multi_turn import MultiTurnEnv
from rlvr.trainer.rollout.types import Rollout, SamplingParams

SENTINEL = "RLVR_ASSISTANT_SENTINEL"  # stands for an assistant message's content while rendering an observation
ENV_THREADS = 8


def observation_text(tokenizer, messages: list[dict], tools: list[dict] | None, ended_with_eos: bool) -> str:
    """The text the chat template writes after an assistant turn's last sampled token, for `messages`
    (tool or user replies), up to and including the next assistant header.

    Rendered against a fixed conversation [user, assistant(SENTINEL)], never the trajectory itself:
    what the template writes after the sentinel (e.g. "<|im_end|>\\n") minus the EOS the engine already
    sampled, then what adding `messages` and the generation prompt appends."""
    base = [{"role": "user", "content": "-"}, {"role": "assistant", "content": SENTINEL}]
    kwargs = {"tools": tools} if tools else {}
    before = tokenizer.apply_chat_template(base, tokenize=False, **kwargs)
    after = tokenizer.apply_chat_template(base + messages, tokenize=False, add_generation_prompt=True, **kwargs)
    if not after.startswith(before) or SENTINEL not in before:
        raise ValueError(f"the chat template of {tokenizer.name_or_path!r} renders a conversation differently once "
                         "messages follow it; it cannot render observations alone (token-in/token-out needs that)")
    closer = before[before.rindex(SENTINEL) + len(SENTINEL):]  # e.g. "<|im_end|>\n"
    eos = tokenizer.decode([tokenizer.eos_token_id])
    if ended_with_eos and closer.startswith(eos):
        closer = closer[len(eos):]
    return closer + after[len(before):]


def run_trajectories(engine, env: MultiTurnEnv, rows: list[dict], params: SamplingParams) -> Rollout:
    """`params.n` trajectories per row, prompt-major like a one-turn `Rollout`, with `loss_mask` and
    `trajectories` (per row: `messages`, `segments` [(role, ids, mask)], `end`, `turns`, `tool_calls`,
    `tool_errors`, `output_truncated`, `tool_seconds`, `turn_rewards`: the replies' rewards) set."""
    if not hasattr(engine, "generate_ids"):
        raise TypeError(f"{type(engine).__name__} has no generate_ids(prompt_ids, params); multi-turn environments "
                        "need an engine that takes token ids (rollout=hf or rollout=vllm)")
    tok = engine.tokenizer
    tools = list(env.tools) or None
    repeated = [row for row in rows for _ in range(params.n)]  # [B*G]
    conversations = [env.messages(row) for row in repeated]
    kwargs = {"tools": tools} if tools else {}
    prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True, **kwargs) for m in conversations]
    prompt_ids = tok(prompts, add_special_tokens=False)["input_ids"] if prompts else []
    limits = [n for n in (env.max_total_tokens, getattr(engine, "context_length", None)) if n is not None]
    budget = min(limits) if limits else None  # the environment's token budget, or the model's context if smaller
    trajs = [{"messages": list(m), "segments": [], "end": None, "turns": 0, "tool_calls": 0, "tool_errors": 0,
              "output_truncated": 0, "tool_seconds": 0.0, "turn_rewards": []} for m in conversations]
    ids = [[] for _ in repeated]  # completion ids so far
    logprobs: list[list[float]] = [[] for _ in repeated]
    mask: list[list[int]] = [[] for _ in repeated]
    truncated = [False] * len(repeated)
    states = [env.start(row) for row in repeated]
    turn_params = replace(params, n=1, seeds=None)
    try:
        with ThreadPoolExecutor(max_workers=ENV_THREADS) as pool:
            active = list(range(len(repeated)))
            while active:
                rooms = {i: params.max_new_tokens if budget is None
                         else min(params.max_new_tokens, budget - len(prompt_ids[i]) - len(ids[i])) for i in active}
                for i in [i for i in active if rooms[i] <= 0]:
                    trajs[i]["end"], truncated[i] = "token_budget", True
                active = [i for i in active if rooms[i] > 0]
                if not active:
                    break
                outputs = {}  # one call per distinct room, so no request asks for more than its room (vLLM refuses that)
                for room in sorted({rooms[i] for i in active}):
                    asked = [i for i in active if rooms[i] == room]
                    out = engine.generate_ids([prompt_ids[i] + ids[i] for i in asked],
                                              replace(turn_params, max_new_tokens=room))
                    outputs.update({i: (out.completion_ids[k], out.logprobs[k], out.truncated[k])
                                    for k, i in enumerate(asked)})
                stepping = []
                for i in active:
                    sampled, lp, was_truncated = outputs[i]
                    cut_by_budget = was_truncated and budget is not None and rooms[i] < params.max_new_tokens
                    ids[i] += sampled
                    logprobs[i] += lp.tolist()
                    mask[i] += [1] * len(sampled)
                    text = tok.decode(sampled, skip_special_tokens=True)
                    trajs[i]["segments"].append(("assistant", list(sampled), 1))
                    trajs[i]["messages"].append({"role": "assistant", "content": text})
                    trajs[i]["turns"] += 1
                    if cut_by_budget:
                        trajs[i]["end"], truncated[i] = "token_budget", True
                    elif was_truncated:
                        trajs[i]["end"], truncated[i] = "truncated", True
                    else:
                        stepping.append((i, text))
                replies = list(pool.map(lambda it: env.step(repeated[it[0]], states[it[0]], it[1]), stepping))
                active = []
                for (i, _), reply in zip(stepping, replies):
                    t = trajs[i]
                    t["tool_calls"] += reply.tool_calls
                    t["tool_errors"] += reply.tool_errors
                    t["output_truncated"] += reply.output_truncated
                    t["tool_seconds"] += reply.tool_seconds
                    if reply.reward is not None:
                        if isinstance(reply.reward, bool) or not isinstance(reply.reward, (int, float)) \
                                or not math.isfinite(reply.reward):
                            raise ValueError(f"{env.name}: step returned Reply.reward={reply.reward!r}; a turn's reward "
                                             "must be a finite number or None")
                        t["turn_rewards"].append(float(reply.reward))
                    if reply.done:
                        t["end"] = "done"
                        continue
                    if t["turns"] >= env.max_turns:
                        t["end"] = "max_turns"
                        continue
                    ended_with_eos = bool(ids[i]) and ids[i][-1] == tok.eos_token_id
                    obs = tok(observation_text(tok, reply.messages, tools, ended_with_eos),
                              add_special_tokens=False)["input_ids"]
                    if budget is not None and len(prompt_ids[i]) + len(ids[i]) + len(obs) >= budget:
                        t["end"], truncated[i] = "token_budget", True
                        continue
                    ids[i] += obs
                    logprobs[i] += [0.0] * len(obs)
                    mask[i] += [0] * len(obs)
                    t["segments"].append(("environment", obs, 0))
                    t["messages"].extend(dict(m) for m in reply.messages)
                    active.append(i)
    finally:
        for state in states:
            env.close(state)
    # a prompt already past the budget ends before any turn: no assistant message, an empty text
    texts = [next((m["content"] for m in reversed(t["messages"]) if m["role"] == "assistant"), "") for t in trajs]
    return Rollout(prompt_ids, ids, texts, [torch.tensor(lp, dtype=torch.float32) for lp in logprobs], truncated,
                   loss_mask=mask, trajectories=trajs)


def trajectory_metrics(trajectories: list[dict]) -> dict:
    """turns/mean, tool_calls/mean, tool/error_frac (failed calls / calls), tool/truncated_frac, tool/time
    (seconds per trajectory), end/<reason>: the share of trajectories ended each way, and, when any turn had a
    reward, reward/turn_mean: the summed turn rewards per trajectory."""
    n = len(trajectories)
    calls = sum(t["tool_calls"] for t in trajectories)
    metrics = {
        "turns/mean": sum(t["turns"] for t in trajectories) / n,
        "tool_calls/mean": calls / n,
        "tool/error_frac": sum(t["tool_errors"] for t in trajectories) / calls if calls else 0.0,
        "tool/truncated_frac": sum(t["output_truncated"] for t in trajectories) / calls if calls else 0.0,
        "tool/time": sum(t["tool_seconds"] for t in trajectories) / n,
    }
    for reason in ("done", "max_turns", "token_budget", "truncated"):
        metrics[f"end/{reason}"] = sum(t["end"] == reason for t in trajectories) / n
    if any(t.get("turn_rewards") for t in trajectories):  # an env with per-turn rewards (envs/multi_turn.py)
        means = [sum(r) / len(r) if (r := t.get("turn_rewards")) else 0.0 for t in trajectories]
        metrics["reward/turn_mean"] = sum(means) / n
    return metrics


def trajectory_sample(tokenizer, trajectory: dict) -> dict:
    """A trajectory for samples.jsonl: its end reason and counts, and each segment's text with its mask
    (1: sampled, trained on; 0: written by the environment)."""
    return {
        "end": trajectory["end"], "turns": trajectory["turns"], "tool_calls": trajectory["tool_calls"],
        "tool_errors": trajectory["tool_errors"],
        "segments": [{"role": role, "mask": m, "tokens": len(seg), "text": tokenizer.decode(seg)}
                     for role, seg, m in trajectory["segments"]],
    }

