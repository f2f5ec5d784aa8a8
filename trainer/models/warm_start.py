"""Supervised warm start of the tiny model on the environment's reference solutions.

RL from scratch on a random model earns no reward at all (every sampled reward is 0 and
nothing is learned), and from a model that is already perfect there is nothing to show.
So the warm start stops by *measured* accuracy, not by step count: every `eval_every`
steps it evaluates greedy accuracy on a validation draw of the train split, and stops as
soon as that accuracy reaches `target_accuracy[0]`. Small models learn arithmetic in a
sudden jump, so the band is hit reliably only with frequent checks. The held-out test
split is never used here; it stays untouched for the before/after comparison.

Each check logs the step out of `max_steps`, the time so far and, as an upper bound, the time
left if the target is never reached. The warm start gives up early, with advice, when the target
is clearly out of reach: half of `max_steps` gone and the best validation accuracy still below a
quarter of the target's low end (the default arithmetic build reaches its band in 450-800 of
3000 steps, so this never cuts it short). The knobs: `model.warm_start.target_accuracy`,
`max_steps`, `lr`, `eval_every`, `eval_rows`, `max_new_tokens` (null: the environment's completion length,
cut to the model's context; README "Models").

A multi-turn environment with `reference_trajectory` (envs/tool_multiply.py) is warm-started on whole
transcripts (tool calls, masked tool outputs, answers; trainer/models/transcripts.py) instead of
`reference`; the validation check then runs the agent loop, tools included, as the held-out eval does.

`stop_on=transcripts` (such environments only) stops by another measure: the share of the validation rows'
tool transcripts the model reproduces token for token under teacher forcing, all but the first token (the
choice to call the tool; `transcript_accuracy`). A warm start that calls the tool on a small share of rows
(`env.reference_tool_fraction`) answers directly at greedy decoding, so greedy accuracy stays near 0 however
well it has learned to copy operands into the call and the tool's output into the answer; this measure reads
exactly that copying, decodes nothing and runs no tool.
"""

from __future__ import annotations

import time

import torch

from rlvr.trainer.evaluation.evaluate import evaluate_greedy
from rlvr.trainer.models.logprobs import pack, token_logprobs
from rlvr.trainer.models.transcripts import has_transcripts, tool_transcripts, transcript_accuracy, warm_start_examples
from rlvr.trainer.rollout.prompts import prompt_lengths, render_prompts
from rlvr.trainer.rollout.hf import HFEngine

VALIDATION_SEED = 1_000_003  # a train-split draw distinct from the training stream


def warm_start(model, tokenizer, env, *, target_accuracy: list[float], max_steps: int, batch_size: int,
               lr: float, eval_every: int, eval_rows: int, max_new_tokens: int | None, seed: int,
               stop_on: str = "greedy", log=print) -> dict:
    low, high = target_accuracy
    val_rows = env.rows("train", eval_rows, seed=VALIDATION_SEED)
    if max_new_tokens is None:
        max_new_tokens = validation_length(model, tokenizer, env, val_rows)
    engine = HFEngine(model, tokenizer)
    measure, measured = _validation_measure(model, tokenizer, env, val_rows, engine, max_new_tokens, stop_on)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history, start = [], time.time()
    accuracy, best, step, gave_up = 0.0, 0.0, 0, False
    transcripts = has_transcripts(env)
    model.train()
    for step in range(1, max_steps + 1):
        rows = env.rows("train", batch_size, seed=seed * 1_000_000 + step)
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in render_prompts(tokenizer, env, rows)]
        if transcripts:  # multi-turn: whole conversations, the environment's tokens masked out
            examples = [(p, e) for p, r in zip(prompt_ids, rows) for e in warm_start_examples(tokenizer, env, r)]
            prompt_ids = [p for p, _ in examples]
            target_ids, masks = [e[0] for _, e in examples], [e[1] for _, e in examples]
        else:
            target_ids = [tokenizer(r["reference"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                          for r in rows]
            masks = None
        batch = pack(prompt_ids, target_ids, tokenizer.pad_token_id, loss_masks=masks)
        logprobs, _ = token_logprobs(model, batch)  # [N, L-1]
        loss = -(logprobs * batch.completion_mask).sum() / batch.completion_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % eval_every == 0:
            accuracy = measure()
            best = max(best, accuracy)
            history.append({"step": step, "loss": round(loss.item(), 4), "val_accuracy": accuracy})
            log(f"warm start: step {step}/{max_steps} loss {loss.item():.3f} validation {measured} {accuracy:.1%} "
                f"(target {low:.0%}); {_progress(time.time() - start, step, max_steps)}")
            if accuracy >= low:
                break
            if out_of_reach(step, max_steps, best, low):
                gave_up = True
                break
    model.eval()
    if gave_up:
        log(f"warm start: stopped at step {step} of {max_steps}: the best validation accuracy, {best:.1%}, is far "
            f"below the target {low:.0%}, which this model is unlikely to reach on {env.name}. RL starts from this "
            f"model (it is cached as it is). Options: a pretrained model (model=hf model.name_or_path=...), a "
            f"lower target (model.warm_start.target_accuracy=[{low / 4:.2f},{high}]), more steps or another lr "
            f"(model.warm_start.max_steps=, model.warm_start.lr=), or an easier task")
    elif accuracy < low:
        log(f"warm start: reached max_steps={max_steps} at validation accuracy {accuracy:.1%}, below {low:.0%}")
    elif accuracy > high:
        log(f"warm start: overshot the band, validation accuracy {accuracy:.1%} > {high:.0%}")
    return {"steps": step, "val_accuracy": accuracy, "seconds": round(time.time() - start, 1), "stop_on": stop_on,
            "target_accuracy": [low, high], "out_of_reach": gave_up, "history": history}


def _validation_measure(model, tokenizer, env, val_rows, engine, max_new_tokens: int, stop_on: str):
    """(the function the stopping rule reads, its name in the log) for `stop_on` (module docstring)."""
    if stop_on == "greedy":
        return (lambda: evaluate_greedy(engine, env, val_rows, max_new_tokens)["accuracy"]), "accuracy"
    if stop_on != "transcripts":
        raise ValueError(f"model.warm_start.stop_on must be greedy or transcripts, got {stop_on!r}")
    if not has_transcripts(env):
        raise ValueError(f"model.warm_start.stop_on=transcripts needs an environment with reference_trajectory; "
                         f"{env.name} has none (use stop_on=greedy)")
    pairs = tool_transcripts(tokenizer, env, val_rows)
    if not pairs:
        raise ValueError(f"model.warm_start.stop_on=transcripts: none of the {len(val_rows)} validation rows of "
                         f"{env.name} has a tool transcript (raise model.warm_start.eval_rows or the env's tool share)")
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"]
               for p in render_prompts(tokenizer, env, [row for row, _ in pairs])]

    def measure() -> float:
        model.eval()
        try:
            return transcript_accuracy(model, prompts, [t for _, t in pairs], tokenizer.pad_token_id)
        finally:
            model.train()

    return measure, f"tool-transcript accuracy ({len(pairs)} rows, teacher-forced)"


def validation_length(model, tokenizer, env, val_rows) -> int:
    """The environment's completion length (`default_max_new_tokens`: what its RL run samples), cut to what the
    model's context leaves after the longest validation prompt: a check shorter than the answers it grades would
    hold the warm start at 0% (gsm8k's worked answers are longer than arithmetic's 16 tokens)."""
    longest = max(prompt_lengths(tokenizer, env, val_rows))
    return max(1, min(int(env.default_max_new_tokens), model.config.max_position_embeddings - longest))


def out_of_reach(step: int, max_steps: int, best: float, low: float) -> bool:
    """Half the step budget spent and the best validation accuracy below a quarter of the target's low end."""
    return step >= max_steps / 2 and best < low / 4


def _progress(elapsed: float, step: int, max_steps: int) -> str:
    left = elapsed / step * (max_steps - step)
    return f"{_duration(elapsed)} so far, at most {_duration(left)} left (max_steps; it stops at the target)"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
