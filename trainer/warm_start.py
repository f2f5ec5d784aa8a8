"""Supervised warm start of the tiny model on the environment's reference solutions.

RL from scratch on a random model earns no reward at all (every sampled reward is 0 and
nothing is learned), and from a model that is already perfect there is nothing to show.
So the warm start stops by *measured* accuracy, not by step count: every `eval_every`
steps it evaluates greedy accuracy on a validation draw of the train split, and stops as
soon as that accuracy reaches `target_accuracy[0]`. Small models learn arithmetic in a
sudden jump, so the band is hit reliably only with frequent checks. The held-out test
split is never used here; it stays untouched for the before/after comparison.
"""

from __future__ import annotations

import time

import torch

from rlvr.trainer.evaluate import evaluate_greedy
from rlvr.trainer.logprobs import pack, token_logprobs
from rlvr.trainer.prompts import render_prompts
from rlvr.trainer.rollout_hf import HFEngine

VALIDATION_SEED = 1_000_003  # a train-split draw distinct from the training stream


def warm_start(model, tokenizer, env, *, target_accuracy: list[float], max_steps: int, batch_size: int,
               lr: float, eval_every: int, eval_rows: int, max_new_tokens: int, seed: int, log=print) -> dict:
    low, high = target_accuracy
    val_rows = env.rows("train", eval_rows, seed=VALIDATION_SEED)
    engine = HFEngine(model, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history, start = [], time.time()
    accuracy, step = 0.0, 0
    model.train()
    for step in range(1, max_steps + 1):
        rows = env.rows("train", batch_size, seed=seed * 1_000_000 + step)
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in render_prompts(tokenizer, env, rows)]
        target_ids = [tokenizer(r["reference"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                      for r in rows]
        batch = pack(prompt_ids, target_ids, tokenizer.pad_token_id)
        logprobs, _ = token_logprobs(model, batch)  # [N, L-1]
        loss = -(logprobs * batch.completion_mask).sum() / batch.completion_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % eval_every == 0:
            accuracy = evaluate_greedy(engine, env, val_rows, max_new_tokens)["accuracy"]
            history.append({"step": step, "loss": round(loss.item(), 4), "val_accuracy": accuracy})
            log(f"warm start: step {step} loss {loss.item():.3f} validation accuracy {accuracy:.1%}")
            if accuracy >= low:
                break
    model.eval()
    if accuracy < low:
        log(f"warm start: reached max_steps={max_steps} at validation accuracy {accuracy:.1%}, below {low:.0%}")
    elif accuracy > high:
        log(f"warm start: overshot the band, validation accuracy {accuracy:.1%} > {high:.0%}")
    return {"steps": step, "val_accuracy": accuracy, "seconds": round(time.time() - start, 1),
            "target_accuracy": [low, high], "history": history}
