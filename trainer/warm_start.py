"""Supervised warm start of the tiny model on the environment's reference solutions.

It is `algo=sft` with `algo.source=reference` (trainer/algos/sft.py) in one process: the same batch
(`sft_data.reference_batch`) and the same loss (`sft_loss`, the token mean over completion tokens), one optimizer
step on the whole batch, with its own AdamW and clipping at 1.0, plus the stopping rule below. It lives beside the
loop (trainer/), not with the models: it generates and evaluates (rollout/, evaluation/), floors above models/,
which only the tiny model's build (models/tiny_model.py) calls into, lazily.

RL from scratch on a random model earns no reward at all (every sampled reward is 0 and
nothing is learned), and from a model that is already perfect there is nothing to show.
So the warm start stops by *measured* accuracy, not by step count: every `eval_every`
steps it evaluates greedy accuracy on a validation draw of the train split, and stops as
soon as that accuracy reaches `target_accuracy[0]`. Small models learn arithmetic in a
sudden jump, so the band is hit reliably only with frequent checks. The held-out test
split is never used here; it stays untouched for the before/after comparison.

Each check logs the step out of `max_steps`, the time so far and, as an upper bound, the time
left if the target is never reached. The knobs: `model.warm_start.target_accuracy`, `max_steps`, `lr`,
`eval_every`, `eval_rows`, `max_new_tokens` (null: the environment's completion length, cut to the model's
context; docs/concepts/models.md).

Giving up (`give_up_reason`). The warm start stops short of its target, and says what to change, when the checks
so far say it will not get there within `max_steps`. The checks are read as means over a *window* (a tenth of
`max_steps`, at least 4 checks), since one check on `eval_rows` rows is noisy (a few points at 200 rows):
  - not started: half of `max_steps` gone and the last window's mean below a quarter of the target's low end. A
    model that has not started may still jump late (small models learn arithmetic in a sudden jump; a
    tool_multiply warm start learned to copy at step 1,100), so this rule waits long;
  - stalled: past that quarter, the change from the previous window's mean to the last one's, carried on at the
    same rate to `max_steps`, leaves it below the target. A plateau fires two windows after it began, and so
    does a rise too slow to arrive in time. What it is for: guess_number trained on one-turn answers sat at 8-16%
    against 30% for 1,500 steps under the first rule alone (checks like those stop at step 600 under this one,
    tests/trainer/test_warm_start_give_up.py), and a tool_multiply warm start sat at 84% against 90% for 2,000 steps.
    The price: a model that sits still above a quarter of the target and then jumps is cut short (2-digit
    addition once sat near 10% for 1,500 steps before jumping to 93%). More `max_steps` widens the window and the
    first rule's wait, so it is also the knob for more patience.
What it does then: the model it has is kept, RL starts from it (a partly warm model can still learn, and the
run's before/after table says how it went), and the log says so with a `WARNING:` line and the knobs. The
report's `outcome` says how the warm start ended (`reached`, `overshot`, `gave_up`, `max_steps`, or `skipped`
for `max_steps=0`); tiny_model.py caches the model under its usual key with that report beside it and repeats
the warning whenever it reuses one that did not reach its target, so a cached model never passes for one that
met it. (Rebuilding under the same key would give the same model: the build is deterministic.)

Progress is kept (`checkpoint`): after every check that does not stop it, the warm start writes the model, the
optimizer and its history to that file (replaced atomically). A run killed mid-way resumes from the last one;
the step's rows are a function of the seed and the step, so the resumed build is the uninterrupted one, byte for
byte. tiny_model.py keeps that file beside the cache entry it is building and deletes it once the entry is ready.

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

import hashlib
import os
import time
from pathlib import Path

import torch

from rlvr.trainer.algos.sft_data import reference_batch
from rlvr.trainer.algos.sft_loss import sft_loss
from rlvr.trainer.evaluation.evaluate import evaluate_greedy
from rlvr.trainer.models.logprobs import token_logprobs
from rlvr.trainer.models.transcripts import has_transcripts, tool_transcripts, transcript_accuracy
from rlvr.trainer.rollout.prompts import prompt_lengths, render_prompts
from rlvr.trainer.rollout.hf import HFEngine

VALIDATION_SEED = 1_000_003  # a train-split draw distinct from the training stream


def warm_start(model, tokenizer, env, *, target_accuracy: list[float], max_steps: int, batch_size: int,
               lr: float, eval_every: int, eval_rows: int, max_new_tokens: int | None, seed: int,
               stop_on: str = "greedy", log=print, checkpoint: str | Path | None = None) -> dict:
    """Train `model` on `env`'s references until the validation measure reaches `target_accuracy[0]`, the checks
    say it will not (`give_up_reason`), or `max_steps`; resumes from `checkpoint` when that file exists and writes
    it at each check (module docstring). Returns the report tiny_model.py caches as warm_start.json."""
    low, high = target_accuracy
    val_rows = env.rows("train", eval_rows, seed=VALIDATION_SEED)
    if max_new_tokens is None:
        max_new_tokens = validation_length(model, tokenizer, env, val_rows)
    engine = HFEngine(model, tokenizer)
    measure, measured = _validation_measure(model, tokenizer, env, val_rows, engine, max_new_tokens, stop_on)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    saved = _load_checkpoint(checkpoint, tokenizer, log)
    history, earlier_seconds, resumed_at = [], 0.0, []
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        history, earlier_seconds, resumed_at = saved["history"], saved["seconds"], saved["resumed_at"] + [saved["step"]]
        log(f"warm start: resuming after step {saved['step']} of {max_steps} from {checkpoint} "
            f"({_duration(earlier_seconds)} of warm start kept)")
    first = saved["step"] + 1 if saved is not None else 1
    step, reason, start = first - 1, None, time.time()
    accuracy = history[-1]["val_accuracy"] if history else 0.0
    model.train()
    for step in range(first, max_steps + 1):
        rows = env.rows("train", batch_size, seed=seed * 1_000_000 + step)
        batch = reference_batch(tokenizer, env, rows)  # algo=sft's source=reference batch (algos/sft_data.py)
        logprobs, _ = token_logprobs(model, batch)  # [N, L-1]
        loss, _ = sft_loss(logprobs, batch.completion_mask)  # algo=sft's loss, one step of the whole batch
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % eval_every == 0:
            accuracy = measure()
            history.append({"step": step, "loss": round(loss.item(), 4), "val_accuracy": accuracy})
            progress = _progress(earlier_seconds, time.time() - start, step - first + 1, max_steps - step)
            log(f"warm start: step {step}/{max_steps} loss {loss.item():.3f} validation {measured} {accuracy:.1%} "
                f"(target {low:.0%}); {progress}")
            if accuracy >= low:
                break
            reason = give_up_reason(history, max_steps, eval_every, low)
            if reason:
                break
            if checkpoint is not None:
                _save_checkpoint(checkpoint, model, optimizer, tokenizer, step, history,
                                 earlier_seconds + time.time() - start, resumed_at)
    model.eval()
    best = max((h["val_accuracy"] for h in history), default=0.0)
    if max_steps == 0:
        outcome = "skipped"
    elif reason:
        outcome = "gave_up"
        log(f"WARNING: warm start: stopped at step {step} of {max_steps} on {env.name}: {reason}. "
            f"{_advice(env, low, high, best, max_steps, lr)}")
    elif accuracy < low:
        outcome = "max_steps"
        log(f"WARNING: warm start: reached max_steps={max_steps} at validation {measured} {accuracy:.1%} (best "
            f"{best:.1%}), below the target {low:.0%}. {_advice(env, low, high, best, max_steps, lr)}")
    elif accuracy > high:
        outcome = "overshot"
        log(f"warm start: overshot the band, validation accuracy {accuracy:.1%} > {high:.0%}")
    else:
        outcome = "reached"
    return {"steps": step, "val_accuracy": accuracy, "best_val_accuracy": best, "outcome": outcome,
            "out_of_reach": reason is not None, "give_up_reason": reason,
            "seconds": round(earlier_seconds + time.time() - start, 1), "resumed_at": resumed_at, "stop_on": stop_on,
            "target_accuracy": [low, high], "history": history}


def give_up_reason(history: list[dict], max_steps: int, eval_every: int, low: float) -> str | None:
    """Why the checks in `history` (`step`, `val_accuracy`, oldest first) say the target's low end `low` will not
    be reached within `max_steps`, or None to go on (module docstring, "Giving up")."""
    if not history:
        return None
    step, window = history[-1]["step"], plateau_window(max_steps, eval_every)
    now = _mean([h["val_accuracy"] for h in history if h["step"] > step - window])
    if now < low / 4:  # not started
        if step >= max_steps / 2:
            return (f"half of max_steps is gone and the validation accuracy, {now:.1%} over the last {window} steps, "
                    f"is below a quarter of the target {low:.0%}")
        return None
    previous = [h["val_accuracy"] for h in history if step - 2 * window < h["step"] <= step - window]
    if step < 2 * window or not previous:
        return None
    then = _mean(previous)
    projected = now + (now - then) * (max_steps - step) / window
    if projected >= low:
        return None
    return (f"the validation accuracy averaged {then:.1%} over steps {step - 2 * window + 1}-{step - window} and "
            f"{now:.1%} over steps {step - window + 1}-{step}; at that rate it would be {projected:.1%} at "
            f"max_steps={max_steps}, below the target {low:.0%}")


def plateau_window(max_steps: int, eval_every: int) -> int:
    """The steps `give_up_reason` averages the checks over: a tenth of `max_steps`, at least 4 checks."""
    return max(max_steps // 10, 4 * eval_every)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _advice(env, low: float, high: float, best: float, max_steps: int, lr: float) -> str:
    lower = max(0.05, int(best * 20) / 20)  # the best so far, rounded down to 5 points
    return (f"The model is kept as it is and RL starts from it (a partly warm model can still learn; the run's "
            f"before/after table says whether it did). To reach the target instead, change one of: "
            f"model.warm_start.lr (now {lr:g}), model.warm_start.max_steps (now {max_steps}; more steps also wait "
            f"longer before giving up), model.warm_start.target_accuracy (e.g. [{lower:.2f},{high:g}]), the env.* "
            f"settings that make {env.name} easier, or a pretrained model (model=hf model.name_or_path=...)")


def _tokenizer_sha(tokenizer) -> str:
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()


def _save_checkpoint(path, model, optimizer, tokenizer, step: int, history: list[dict], seconds: float,
                     resumed_at: list[int]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "history": history,
                "seconds": seconds, "resumed_at": resumed_at, "tokenizer": _tokenizer_sha(tokenizer)}, tmp)
    os.replace(tmp, path)  # atomic: a kill while writing leaves the previous checkpoint


def _load_checkpoint(path, tokenizer, log) -> dict | None:
    if path is None or not Path(path).exists():
        return None
    try:
        saved = torch.load(path, weights_only=True)
    except Exception as error:  # noqa: BLE001 - a file that does not load is progress lost, not a failed build
        log(f"warm start: {path} does not load ({type(error).__name__}); starting over")
        return None
    if saved.get("tokenizer") != _tokenizer_sha(tokenizer):  # rare under the cache key: a tokenizer built otherwise
        log(f"warm start: {path} was saved with another tokenizer; starting over")
        return None
    return saved


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


def _progress(earlier: float, elapsed: float, steps_done: int, steps_left: int) -> str:
    """The time so far (`earlier`: before a resume) and, at this run's pace, the most time left."""
    left = elapsed / steps_done * steps_left
    return (f"{_duration(earlier + elapsed)} so far, at most {_duration(left)} left (max_steps; it stops at the "
            f"target, or earlier when the checks say it will not get there)")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
