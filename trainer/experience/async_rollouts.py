"""Asynchronous rollouts (`rollout.max_staleness=k > 0`): a producer thread samples and scores the batches
of steps t+1..t+k while the trainer updates on step t.

The synchronous loop (k = 0) never builds this: `sample_and_score` (collect.py) generates with the trainer's engine
and the loop is what it always was. With k > 0:

* Versions. A policy version is the number of optimizer updates in a set of weights; the trainer's
  weights after step t's update are version t. The engine samples each batch from one fixed version,
  and every sample carries it (`Rollout.version`). Step t trains on a batch of version v with
  staleness (t - 1) - v: 0 is the synchronous loop's, and the trainer refuses (RuntimeError) any
  batch with staleness > k or < 0.
* The gate. The producer starts the batch of step s only once the trainer has published version
  s - 1 - k, so it is never more than k batches ahead, and the queue never holds more than k.
* Weights. `sync_weights` (the step calls it after each update, trainer/step.py) publishes a snapshot of the
  weights (a cloned state dict), versioned; the producer loads the newest snapshot into its engine
  between two `generate` calls, never during one. For `rollout=hf` the producer samples from its own
  copy of the model (and tokenizer), so the trainer's module is never read while it changes; the
  held-out eval still runs on the trainer's module. An engine that copies weights (vLLM) is shared:
  a lock makes the producer's generate, its weight loads and the eval's generate take turns.
* Streaming verification. The producer hands each generated batch to a thread pool that scores it
  group by group (one task per prompt's G completions) and moves on to the next batch's generation;
  the trainer waits for the scores of its own batch only. HF generate (and vLLM's `generate`) return
  a whole batch at once, so "as soon as its completions exist" means as soon as its batch's exist.
* Dynamic sampling (DAPO). A step's first round comes from the queue; when the filter needs further
  rounds, the trainer asks the producer's engine for them at once (under the lock, with the newest
  weights, so their staleness is 0), so the step still draws until it has enough mixed groups.
* Importance correction. The engine's logprobs are kept; GRPO's truncated importance weights
  min(pi_trainer / pi_engine, rollout.importance_cap) reweight stale samples as they reweight the
  engine/trainer mismatch (algos/grpo.py). That is why k > 0 is limited to the GRPO family with a cap.
* Resume. The queue is not checkpointed: a resumed run's producer starts empty at the checkpoint's
  version and samples the next steps' prompts from the same seeds, but the completions (and which
  version samples which step) differ from the uninterrupted run's; only k = 0 resumes bit for bit.
  Which version samples a batch depends on thread timing, so k > 0 runs are not bit-reproducible.

Every wait (queue, scores, the gate, joins) polls with a timeout, so a producer exception is raised in the
trainer at its next wait, and nothing hangs past `rollout.async_timeout_s`.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import torch

from rlvr.trainer.experience.batch import Sampled
from rlvr.trainer.experience.collect import draw_and_generate
from rlvr.trainer.experience.rewards import score_round

_POLL_S = 0.05  # how often a wait looks at the other side's error and stop flags


class ProducerError(RuntimeError):
    """The producer thread (generation, scoring or a weight load) failed; the cause is chained."""


class _StateDict:
    """A weight snapshot that looks like a module to `Engine.sync_weights` (vLLM reads `state_dict()`)."""

    def __init__(self, state: dict):
        self._state = state

    def state_dict(self) -> dict:
        return self._state


class AsyncRollouts:
    """The producer thread, its queue and its engine; `take` is the trainer's side."""

    def __init__(self, ctx, trainer_engine, start_step: int, last_step: int, max_staleness: int,
                 timeout_s: float, score_workers: int = 4):
        self.k, self.timeout_s = max_staleness, timeout_s
        self.start_step, self.last_step = start_step, last_step
        self.trainer_engine = trainer_engine  # the PolicyEngine the loop built (rollout/weights.py)
        self.shared = trainer_engine.copies_weights  # vLLM: one engine, taking turns under the lock
        if self.shared:
            engine, tokenizer = trainer_engine, ctx.tokenizer
        else:  # hf: the producer's own model and tokenizer (a fast tokenizer is not safe across threads)
            tokenizer = copy.deepcopy(ctx.tokenizer)
            engine = _producer_hf_engine(ctx, copy.deepcopy(trainer_engine.weights(ctx.model)), tokenizer, timeout_s)
        self.engine = engine
        # what sampling reads from the context, with the producer's engine and tokenizer
        self.pctx = SimpleNamespace(**{**vars(ctx), "engine": engine, "tokenizer": tokenizer, "rollouts": None})
        self.lock = threading.Lock()  # one generate or weight load at a time on the producer's engine
        self.gate = threading.Condition()
        self.published = start_step  # the trainer's newest version
        self.pending: dict | None = None  # its snapshot, until the producer loads it
        self.engine_version = start_step  # the version in the producer's engine
        self.queue: queue.Queue = queue.Queue(maxsize=max_staleness)
        # two pools, so a batch's task waiting on its groups can never hold every worker its groups need:
        # batches are packed one at a time, in order; their groups are scored in parallel
        self.batches = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlvr-score-batch")
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(score_workers, ctx.cfg.train.prompts_per_step)),
                                       thread_name_prefix="rlvr-score")
        self.group_size = ctx.cfg.train.completions_per_prompt
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.max_queued = 0  # the most batches the queue ever held (tests check it against k)
        self.versions: dict[int, list[int]] = {}  # step -> the versions of every sample it was handed
        self._meter = threading.Lock()
        self._busy = 0.0  # seconds the producer's engine generated since the last step (engine_idle_frac)
        self._generating_since: float | None = None  # when the generate running now began
        self._waited = 0.0  # seconds the trainer spent waiting for batches (trainer_idle_frac)
        self._clock = time.perf_counter()
        self._threads = torch.get_num_threads()  # the trainer's (`threads`), set in the producer thread too
        self.thread = threading.Thread(target=self._run, name="rlvr-rollout-producer", daemon=True)
        self.thread.start()

    # ---- the producer -------------------------------------------------------------------------------------

    def _run(self) -> None:
        # OpenMP's thread count is per thread: without this the producer's thread would run torch (and vLLM's CPU
        # attention, which checks that a batch's metadata was built with the count it runs with) on the default
        torch.set_num_threads(self._threads)
        try:
            for step in range(self.start_step + 1, self.last_step + 1):
                if not self._wait_for_version(step - 1 - self.k):
                    return
                timings: dict = {}
                drawn = self._generate(step, 0, timings)
                scored = self.batches.submit(score_round, self.pctx, drawn, timings, self._score_groups)
                if not self._put((step, scored, timings)):
                    return
        except BaseException as error:  # noqa: BLE001 -- handed to the trainer, which raises it
            self.error = error

    def _wait_for_version(self, version: int) -> bool:
        """Block until the trainer has published `version`; False when stopping or past the timeout."""
        deadline = time.monotonic() + self.timeout_s
        with self.gate:
            while self.published < version:
                if self.stop.is_set() or time.monotonic() > deadline:
                    return False
                self.gate.wait(_POLL_S)
        return not self.stop.is_set()

    def _put(self, item) -> bool:
        deadline = time.monotonic() + self.timeout_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.queue.put(item, timeout=_POLL_S)
            except queue.Full:
                continue
            self.max_queued = max(self.max_queued, self.queue.qsize())
            return True
        return False

    def _generate(self, step: int, round_: int, timings: dict):
        """One round from the producer's engine, with the newest published weights loaded first."""
        with self.lock:
            self._load_newest()
            version = self.engine_version
            self._metered(generating=True)
            try:
                drawn = draw_and_generate(self.pctx, step, timings, round_)
            finally:
                self._metered(generating=False)
        drawn.rollout.version = [version] * len(drawn.rollout.completion_ids)
        return drawn

    def _metered(self, generating: bool) -> None:
        """The engine starts or stops generating: its busy seconds, counted per step by `step_metrics`."""
        with self._meter:
            now = time.perf_counter()
            if generating:
                self._generating_since = now
            else:
                self._busy += now - self._generating_since
                self._generating_since = None

    def _load_newest(self) -> None:
        with self.gate:
            version, state, self.pending = self.published, self.pending, None
        if state is None:
            return
        if self.shared:
            self.engine.engine.sync_weights(_StateDict(state))  # the engine inside the PolicyEngine
        else:
            self.engine.model.load_state_dict(state)
        self.engine_version = version

    def _score_groups(self, texts: list[str], rows: list) -> list:
        """`env.score`, one task per group on the pool, in order."""
        g = self.group_size
        parts = [self.pool.submit(self.pctx.env.score, texts[i:i + g], rows[i:i + g]) for i in range(0, len(texts), g)]
        return [result for part in parts for result in part.result(timeout=self.timeout_s)]

    # ---- the trainer ----------------------------------------------------------------------------------------

    def publish(self, module: torch.nn.Module) -> None:
        """After an update: the weights of the next version, snapshotted so later updates do not reach it."""
        state = {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}
        with self.gate:
            self.published += 1
            self.pending = state
            self.gate.notify_all()

    def take(self, step: int, round_: int, timings: dict) -> Sampled:
        """Step `step`'s batch (round 0 from the queue; a further round sampled now), its staleness checked."""
        if round_ > 0:
            self._raise_if_failed()
            sampled = score_round(self.pctx, self._generate(step, round_, timings), timings, self._score_groups)
        else:
            start = time.perf_counter()
            item_step, scored, producer_timings = self._get()
            if item_step != step:
                raise ProducerError(f"asynchronous rollouts: step {step} was handed the batch of step {item_step}")
            sampled = self._result(scored)
            waited = time.perf_counter() - start
            self._waited += waited
            for name, seconds in producer_timings.items():  # overlapped with the trainer's earlier steps
                timings[name] = timings.get(name, 0.0) + seconds
            timings["wait"] = timings.get("wait", 0.0) + waited
        self._check_staleness(step, sampled.rollout.version)
        self.versions.setdefault(step, []).extend(sampled.rollout.version)
        return sampled

    def _get(self):
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return self.queue.get(timeout=_POLL_S)
            except queue.Empty:
                self._raise_if_failed()
                if not self.thread.is_alive():
                    raise ProducerError("asynchronous rollouts: the producer stopped without a batch") from None
                if time.monotonic() > deadline:
                    raise ProducerError(f"asynchronous rollouts: no batch within rollout.async_timeout_s="
                                        f"{self.timeout_s:g}") from None

    def _result(self, scored) -> Sampled:
        try:
            return scored.result(timeout=self.timeout_s)
        except TimeoutError:
            raise ProducerError(f"asynchronous rollouts: scoring took over rollout.async_timeout_s="
                                f"{self.timeout_s:g}") from None
        except Exception as error:
            raise ProducerError(f"asynchronous rollouts: scoring failed: {error!r}") from error

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise ProducerError(f"asynchronous rollouts: the producer failed: {self.error!r}") from self.error

    def _check_staleness(self, step: int, versions: list[int]) -> None:
        staleness = {step - 1 - v for v in versions}
        if max(staleness) > self.k or min(staleness) < 0:
            raise ProducerError(f"asynchronous rollouts: step {step} was handed samples of versions "
                                f"{sorted(set(versions))}, staleness {sorted(staleness)}; allowed 0..{self.k} "
                                f"(rollout.max_staleness)")

    def step_metrics(self, step: int) -> dict:
        """`async/*` for the step just trained: its samples' staleness (mean and the share at each value),
        and the shares of the wall time since the previous step the trainer waited and the engine idled."""
        now = time.perf_counter()
        elapsed, self._clock = max(now - self._clock, 1e-9), now
        with self._meter:  # a generate that spans two steps counts in each for its share
            busy, self._busy = self._busy, 0.0
            if self._generating_since is not None:
                busy += now - self._generating_since
                self._generating_since = now
        waited, self._waited = self._waited, 0.0
        staleness = [step - 1 - v for v in self.versions.pop(step, [])]
        metrics = {"async/trainer_idle_frac": min(1.0, waited / elapsed),
                   "async/engine_idle_frac": max(0.0, 1.0 - busy / elapsed)}
        if staleness:
            metrics["async/staleness_mean"] = sum(staleness) / len(staleness)
            counts = Counter(staleness)
            metrics.update({f"async/staleness_{s}": counts.get(s, 0) / len(staleness) for s in range(self.k + 1)})
        return metrics

    def close(self) -> None:
        """Stop the producer and the scoring pool (waits bounded by the timeout); safe to call twice."""
        self.stop.set()
        with self.gate:
            self.gate.notify_all()
        self.thread.join(timeout=self.timeout_s)
        self.batches.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(wait=False, cancel_futures=True)
        if not self.shared:  # the producer's own engine (a child process with rollout.hf.producer=process)
            self.engine.shutdown()


def _producer_hf_engine(ctx, model, tokenizer, timeout_s: float):
    """rollout=hf's producer engine on its own copy of the policy: in this process's producer thread
    (`rollout.hf.producer=thread`), or in a child process on a core of its own (`process`, rollout/hf_process.py)."""
    if ctx.cfg.rollout.hf.producer == "thread":
        from rlvr.trainer.rollout.hf import HFEngine

        return HFEngine(model, tokenizer, prefill_once=ctx.cfg.rollout.hf.prefill_once)
    from rlvr.trainer.rollout.hf_process import HFProcessEngine
    from rlvr.trainer.seeding import derive_seed

    return HFProcessEngine(model, tokenizer, seed=derive_seed("producer", ctx.cfg.seed),
                           threads=int(ctx.cfg.threads), timeout_s=timeout_s,
                           prefill_once=ctx.cfg.rollout.hf.prefill_once)


class AsyncTrainerEngine:
    """What the algorithms and the held-out eval see as `ctx.engine` with k > 0: `sync_weights` publishes
    the new version to the producer; `generate` (the eval) runs on the trainer's engine (hf: the policy
    module itself; vLLM: the shared engine, under the producer's lock)."""

    def __init__(self, inner, rollouts: AsyncRollouts):
        self.inner, self.rollouts = inner, rollouts
        self.tokenizer = inner.tokenizer
        self.copies_weights = inner.copies_weights

    @property
    def context_length(self) -> int | None:
        return self.inner.context_length

    def generate(self, prompts, params):
        if not self.rollouts.shared:
            return self.inner.generate(prompts, params)
        with self.rollouts.lock:  # the shared engine: the trainer's newest weights first, the eval is of them
            self.rollouts._load_newest()
            return self.inner.generate(prompts, params)

    def generate_ids(self, prompt_ids, params):
        if not self.rollouts.shared:
            return self.inner.generate_ids(prompt_ids, params)
        with self.rollouts.lock:
            self.rollouts._load_newest()
            return self.inner.generate_ids(prompt_ids, params)

    def sync_weights(self, model) -> None:
        if not self.rollouts.shared:
            self.inner.sync_weights(model)  # hf: the trainer's engine samples the policy module itself (the eval)
        self.rollouts.publish(self.inner.weights(model))

    def shutdown(self) -> None:
        self.rollouts.close()
        self.inner.shutdown()


def start_async_rollouts(ctx, start_step: int, last_step: int) -> AsyncRollouts:
    """Start the producer for steps start_step+1..last_step; `ctx.engine` becomes the trainer's side of it."""
    cfg = ctx.cfg
    rollouts = AsyncRollouts(ctx, ctx.engine, start_step, last_step, cfg.rollout.max_staleness,
                             cfg.rollout.async_timeout_s)
    ctx.engine, ctx.rollouts = AsyncTrainerEngine(ctx.engine, rollouts), rollouts
    return rollouts
