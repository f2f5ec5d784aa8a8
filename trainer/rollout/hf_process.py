"""Hugging Face `generate` in a process of its own: the asynchronous producer's engine with
`rollout.hf.producer=process` (trainer/experience/async_rollouts.py).

With `rollout=hf` and `max_staleness > 0` the producer samples from its own copy of the policy. In a thread
of the trainer's process (`rollout.hf.producer=thread`) that copy's `generate` shares the trainer's interpreter:
on a small model `generate` is mostly Python, which holds the GIL, so the two take turns on one core and the
overlap gains little (BENCHMARKS.md "Asynchronous rollouts"). Here the copy runs in a child process, on a
core of its own.

* Weights. The copy's parameters and buffers live in shared memory (torch.multiprocessing): the child and
  this process map the same pages. `model` here is that copy, so the producer loads a new version into it in
  place (`load_state_dict`, as it does for its thread engine), between two `generate` calls, never during
  one (the producer's lock, and `generate` here returns only once the child has answered): each batch is
  sampled from one version, and no weight crosses the pipe.
* Requests and results cross a pipe: prompts (text or token ids) and `SamplingParams` out, the `Rollout`
  back as plain lists (a shared-memory segment per logprob tensor would cost more than the numbers).
* Sampling. The child samples with torch's global generator, seeded once from `seed` when it starts, as
  the thread engine samples with the trainer's; `rollout=hf` ignores per-prompt seeds either way.
* Failure. Every wait for the child polls with a timeout and checks that it is alive: a child that dies is a
  `ProducerProcessError` naming its exit code, one that does not answer within `timeout_s` is killed and named;
  an exception inside the child comes back with its traceback. The child exits when the pipe closes
  (this process gone) or on `shutdown`, which kills it if it does not stop within a few seconds.
* Start. The child is started with multiprocessing's spawn (never fork: the trainer's process has threads),
  which imports the main module again in the child: a script that calls `train` must do so under
  `if __name__ == "__main__":`, as with any spawned worker (the `rlvr` command and `python -m rlvr` do).
* Cost. The child is a second Python with torch and transformers imported (about 0.3-0.4 GB resident) and
  starts in a few seconds, before the training loop. The model must be on the CPU: on a GPU the engines
  built for it (rollout=vllm or server) are the ones to use.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback

import torch

from rlvr.errors import ConfigError
from rlvr.trainer.rollout.hf import HFEngine
from rlvr.trainer.rollout.types import Rollout, SamplingParams

_POLL_S = 0.05
_START_TIMEOUT_S = 300.0  # a spawned interpreter importing torch and transformers, on a loaded machine
_STOP_S = 5.0


class ProducerProcessError(RuntimeError):
    """The child process died, hung or raised; the message names which (the trainer chains it in a ProducerError)."""


class HFProcessEngine:
    """An `Engine` (rollout/types.py) whose `generate` runs HF generate in a child process on `model`, which
    this object keeps in shared memory: loading weights into `self.model` is what the child samples next."""

    copies_weights = False

    def __init__(self, model, tokenizer, seed: int, threads: int, timeout_s: float, prefill_once: bool = True):
        if any(p.device.type != "cpu" for p in model.parameters()):
            raise ConfigError("rollout.hf.producer=process samples on the CPU; the policy is on "
                              f"{next(model.parameters()).device} (set rollout.hf.producer=thread, or use rollout=vllm "
                              "or rollout=server there)")
        self.model, self.tokenizer, self.timeout_s = model, tokenizer, timeout_s
        model.share_memory()  # in place: the parameters' storages move to shared memory, seen by both processes
        context = multiprocessing.get_context("spawn")  # never fork a process whose other threads hold locks
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_conn, model, tokenizer, seed, threads, prefill_once),
                                        name="rlvr-hf-producer", daemon=True)
        self._process.start()
        child_conn.close()
        self._receive(_START_TIMEOUT_S, "start")  # the child's "ready": its imports are done before the loop

    @property
    def context_length(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def sync_weights(self, model) -> None:
        """Load `model`'s weights into the shared copy (the producer loads its snapshots into `self.model`)."""
        self.model.load_state_dict(model.state_dict())

    def generate(self, prompts: list[str], params: SamplingParams) -> Rollout:
        return self._call("generate", prompts, params)

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollout:
        return self._call("generate_ids", prompt_ids, params)

    def shutdown(self) -> None:
        """Stop the child (asked, then killed after a few seconds); safe to call twice."""
        if self._process.is_alive():
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self._process.join(_STOP_S)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(_STOP_S)
        self._conn.close()

    def _call(self, method: str, *args) -> Rollout:
        try:
            self._conn.send((method, args))
        except (BrokenPipeError, OSError) as error:
            raise ProducerProcessError(self._died(method)) from error
        fields = self._receive(self.timeout_s, method)
        fields["logprobs"] = [torch.tensor(row, dtype=torch.float32) for row in fields["logprobs"]]
        return Rollout(**fields)

    def _receive(self, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while not self._conn.poll(_POLL_S):
            if not self._process.is_alive():
                raise ProducerProcessError(self._died(what))
            if time.monotonic() > deadline:
                self._process.kill()
                raise ProducerProcessError(f"the producer process did not answer {what} within {timeout_s:g} s "
                                           "(rollout.async_timeout_s); it was killed")
        try:
            status, value = self._conn.recv()
        except EOFError:
            self._process.join(_STOP_S)
            raise ProducerProcessError(self._died(what)) from None
        if status == "error":
            raise ProducerProcessError(f"the producer process failed in {what}:\n{value}")
        return value

    def _died(self, what: str) -> str:
        message = f"the producer process died during {what} (exit code {self._process.exitcode})"
        if what == "start":  # its traceback, if any, is on stderr
            message += ("; it is started with multiprocessing's spawn, which imports the main module again: a script "
                        "that calls rlvr's training must do so under `if __name__ == '__main__':` (or set "
                        "rollout.hf.producer=thread)")
        return message


def _serve(conn, model, tokenizer, seed: int, threads: int, prefill_once: bool) -> None:
    """The child: answer generate requests on the shared `model` until the pipe closes or a None arrives."""
    if threads > 0:  # the trainer's `threads`; 0 leaves torch's default, as there
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    engine = HFEngine(model, tokenizer, prefill_once=prefill_once)
    conn.send(("ok", None))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            request = None  # the trainer's process is gone
        if request is None:  # nothing to flush or save: skip the interpreter's teardown of torch (seconds)
            os._exit(0)
        method, args = request
        try:
            rollout = getattr(engine, method)(*args)
            reply = ("ok", {"prompt_ids": rollout.prompt_ids, "completion_ids": rollout.completion_ids,
                            "texts": rollout.texts, "logprobs": [row.tolist() for row in rollout.logprobs],
                            "truncated": rollout.truncated})
        except Exception:  # noqa: BLE001 -- handed back with its traceback, raised in the trainer
            reply = ("error", traceback.format_exc())
        conn.send(reply)
