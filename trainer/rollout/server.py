"""Rollouts on engine servers: an `Engine` (rollout/types.py) whose generation runs on one or more
OpenAI-compatible vLLM servers, reached over HTTP, with failover.

Token in, token out. Each prompt goes to `/v1/completions` as the token ids of the trainer's tokenizer
(the server never re-tokenises it) with `return_token_ids` and `logprobs=0`, so the reply carries the
sampled token ids and their logprobs, as the colocated engines return them; texts are decoded here by
the trainer's tokenizer. One request per prompt holds its G completions (`n`), with the prompt's own
seed when the loop gives seeds (`rollout.seed_per_prompt`): a request resent to another server samples
the same completions there, since every server holds the same weights.

Spreading and failover. A generate call sends its prompts to the live servers round-robin, each request
on its own thread with an HTTP timeout and a deadline watched from outside (`request_timeout_s`). A
request that fails (connection refused or reset, a 5xx, no reply in time) marks its server dead and is
resent to a survivor; each prompt's reply is taken exactly once. With no server left, the call raises
`ServerError` naming the endpoints. The longest a prompt can wait is thus `request_timeout_s` per
server tried.

Weights (`sync_weights`). The policy's state dict is written as safetensors to a new directory of
`weights_dir` (a path every server can read: servers rlvr starts share this machine's disk), then each
live server is asked, through vLLM's dev-mode `/collective_rpc`, to `reload_weights(weights_path=DIR)`,
the in-place reload the colocated engine uses (rollout/vllm.py), and to reset its prefix cache. The
loop never generates during a sync (the asynchronous producer loads weights between two generate calls,
trainer/experience/async_rollouts.py), so no request is answered by a mix of two versions; `versions` records the
version each server holds, and a generate refuses a server that lags the client's `version`. A dead
server that answers `/health` again gets the newest weights before it is given requests.

`rollout.repetition_penalty`, `rollout.min_p` and `rollout.generation_kwargs` (vLLM's request fields) go in each
request's body, as the colocated engine passes them (rollout/generation_settings.py).

`endpoint_label` names the endpoint in errors: `rlvr eval endpoint=URL` reads "endpoint=URL".
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

import torch

from rlvr.trainer.rollout.types import Rollout, SamplingParams

_POLL_S = 0.5  # how often a generate looks at its requests' deadlines
_RETRY_DEAD_S = 10.0  # how often a generate asks a dead server's /health whether it is back


class ServerError(RuntimeError):
    """No live server could answer (each one's last error is in the message)."""


class ServerEngine:
    """An `Engine` over OpenAI-compatible servers at `endpoints` (base URLs ending in /v1)."""

    copies_weights = True

    def __init__(self, endpoints: list[str], tokenizer, *, model_name: str | None = None,
                 request_timeout_s: float = 120.0, weights_dir: str | Path | None = None,
                 endpoint_label: str = "rollout.server.endpoints", context_length: int | None = None,
                 processes: list | None = None, owned_dirs: list | None = None, log=print):
        if not endpoints:
            raise ValueError(f"{endpoint_label}: no server URL given")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.tokenizer = tokenizer
        self.timeout_s = request_timeout_s
        self.label = endpoint_label
        self.context_length = context_length
        self.processes = processes or []  # the VLLMServer processes this engine stops at shutdown
        self.owned_dirs = list(owned_dirs or [])  # removed at shutdown (the started servers' model copy)
        self.log = log
        self.live = list(self.endpoints)
        self.errors: dict[str, str] = {}  # endpoint -> why it was marked dead
        self._dead_since: dict[str, float] = {}
        self.version = 0  # weight versions pushed by sync_weights
        self.versions = {e: 0 for e in self.endpoints}  # the version each server holds
        self.last_sync_s = 0.0
        # the latest generate requests, one record each: endpoint, outcome, seconds (what a failover cost)
        self.requests: deque[dict] = deque(maxlen=100_000)
        self._lock = threading.Lock()
        self._own_weights_dir = weights_dir is None
        self.weights_dir = Path(weights_dir or tempfile.mkdtemp(prefix="rlvr-weights-"))
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="rlvr-server-request")
        atexit.register(self.shutdown)  # a run that raises still stops the servers it started
        self.model_name = model_name or self._served_model(self.endpoints[0])

    # ---- HTTP ---------------------------------------------------------------------------------------------

    def _call(self, url: str, body: dict | None = None, timeout_s: float | None = None) -> dict:
        """POST `body` (GET when None) as JSON; the decoded reply. urllib's errors pass through."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as response:
            raw = response.read()
        return json.loads(raw) if raw else {}

    def _timed_call(self, began: list, url: str, body: dict) -> dict:
        began.append(time.monotonic())
        return self._call(url, body)

    def _served_model(self, endpoint: str) -> str:
        try:
            models = self._call(f"{endpoint}/models", timeout_s=min(self.timeout_s, 30.0))["data"]
        except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
            raise ServerError(f"{self.label}={endpoint} does not answer GET /models: {_reason(error)}") from None
        if not models:
            raise ServerError(f"{self.label}={endpoint} serves no model (GET /models is empty)")
        return models[0]["id"]

    # ---- generation ---------------------------------------------------------------------------------------

    def generate(self, prompts: list[str], params: SamplingParams) -> Rollout:
        return self.generate_ids([self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts], params)

    def generate_ids(self, encoded: list[list[int]], params: SamplingParams) -> Rollout:
        """`params.n` completions per prompt, prompt-major, spread over the live servers, failed ones resent."""
        if params.seeds is not None and len(params.seeds) != len(encoded):
            raise ValueError(f"{len(params.seeds)} seeds for {len(encoded)} prompts")
        self._readmit()
        replies: list[dict | None] = [None] * len(encoded)
        tried: list[set] = [set() for _ in encoded]
        running: dict[Future, tuple[int, str, list]] = {}  # -> (prompt, server, [when its thread began])
        turn = 0

        def send(i: int) -> None:
            nonlocal turn
            candidates = [e for e in self._current() if e not in tried[i]]
            if not candidates:
                raise ServerError(f"{self.label}: no live server left for prompt {i} of {len(encoded)}; "
                                  f"tried {sorted(tried[i])}; errors: {self.errors}")
            endpoint = candidates[turn % len(candidates)]
            turn += 1
            tried[i].add(endpoint)
            body = self._request_body(encoded[i], params, None if params.seeds is None else params.seeds[i])
            began: list[float] = []  # set by the pool's thread: a request queued behind others has no deadline yet
            future = self._pool.submit(self._timed_call, began, f"{endpoint}/completions", body)
            running[future] = (i, endpoint, began)

        for i in range(len(encoded)):
            send(i)
        while running:
            now = time.monotonic()
            deadlines = [began[0] + self.timeout_s for _, _, began in running.values() if began]
            wait_s = max(0.0, min(deadlines) - now) if deadlines else _POLL_S
            wait(list(running), timeout=min(wait_s, _POLL_S), return_when=FIRST_COMPLETED)
            now = time.monotonic()
            for future in list(running):
                i, endpoint, began = running[future]
                if future.done():  # a reply that came after its deadline still counts
                    error = future.exception()
                    if isinstance(error, TimeoutError) or isinstance(getattr(error, "reason", None), TimeoutError):
                        # the socket's own timeout (read, or connect inside a URLError) beat this loop's check
                        error = TimeoutError(f"no reply within request_timeout_s={self.timeout_s:g}")
                elif began and now - began[0] >= self.timeout_s:  # abandoned: its thread ends at the socket timeout
                    error = TimeoutError(f"no reply within request_timeout_s={self.timeout_s:g}")
                else:
                    continue
                del running[future]
                self._record(endpoint, error, now - began[0] if began else 0.0)
                if error is None:
                    replies[i] = future.result()
                    continue
                if isinstance(error, urllib.error.HTTPError) and 400 <= error.code < 500:
                    raise ServerError(f"{self.label}={endpoint} refused a request ({_reason(error)}): the request, "
                                      "not the server, is at fault")
                self._mark_dead(endpoint, error)
                send(i)
        return self._rollout(encoded, replies, params)

    def _request_body(self, prompt_ids: list[int], params: SamplingParams, seed: int | None) -> dict:
        body = {
            "model": self.model_name, "prompt": prompt_ids, "n": params.n, "max_tokens": params.max_new_tokens,
            "temperature": 0.0 if params.greedy else params.temperature,
            "top_p": 1.0 if params.greedy else params.top_p,
            "top_k": 0 if params.greedy else params.top_k,  # 0: off, as in rollout/vllm.py
            "min_p": 0.0 if params.greedy else params.min_p,
            "repetition_penalty": params.repetition_penalty,  # greedy too, as in rollout/vllm.py
            "logprobs": 0,  # the sampled token's only
            "return_token_ids": True,
            "stop_token_ids": [self.tokenizer.eos_token_id],
            "include_stop_str_in_output": True,  # the stop string stays in the text, as in HFEngine
            "skip_special_tokens": True,
        }
        body.update(params.generation_kwargs)  # vLLM's own request fields, checked at start (generation_settings.py)
        if params.stop:
            body["stop"] = list(params.stop)
        if seed is not None:
            body["seed"] = seed
        return body

    def _rollout(self, encoded: list[list[int]], replies: list[dict], params: SamplingParams) -> Rollout:
        prompt_ids, completion_ids, texts, logprobs, truncated = [], [], [], [], []
        for ids, reply in zip(encoded, replies):
            choices = sorted(reply["choices"], key=lambda c: c["index"])
            if len(choices) != params.n:
                raise ServerError(f"{self.label}: a reply holds {len(choices)} completions, {params.n} were asked")
            for choice in choices:
                tokens = list(choice["token_ids"])
                token_logprobs = choice["logprobs"]["token_logprobs"] if tokens else []
                if len(token_logprobs) != len(tokens):
                    raise ServerError(f"{self.label}: {len(tokens)} tokens but {len(token_logprobs)} logprobs")
                prompt_ids.append(ids)
                completion_ids.append(tokens)
                texts.append(self.tokenizer.decode(tokens, skip_special_tokens=True))
                logprobs.append(torch.tensor(token_logprobs, dtype=torch.float32))
                truncated.append(choice["finish_reason"] == "length")
        return Rollout(prompt_ids, completion_ids, texts, logprobs, truncated)

    # ---- servers' health ----------------------------------------------------------------------------------

    def _current(self) -> list[str]:
        """The live servers that hold the newest weights."""
        with self._lock:
            return [e for e in self.live if self.versions[e] == self.version]

    def _mark_dead(self, endpoint: str, error: BaseException) -> None:
        with self._lock:
            if endpoint in self.live:
                self.live.remove(endpoint)
                self._dead_since[endpoint] = time.monotonic()
                self.errors[endpoint] = _reason(error)
                self.log(f"{self.label}={endpoint} failed ({self.errors[endpoint]}); its requests go to "
                         f"{len(self.live)} other server(s)")

    def _record(self, endpoint: str, error: BaseException | None, seconds: float) -> None:
        with self._lock:
            self.requests.append({"endpoint": endpoint, "ok": error is None, "seconds": seconds,
                                  "error": None if error is None else _reason(error)})

    def _readmit(self) -> None:
        """A dead server whose /health answers again gets the newest weights, then requests."""
        for endpoint in list(self._dead_since):
            if time.monotonic() - self._dead_since[endpoint] < _RETRY_DEAD_S:
                continue
            self._dead_since[endpoint] = time.monotonic()
            try:
                self._call(endpoint.removesuffix("/v1") + "/health", timeout_s=5.0)
                if self.version:
                    self._load(endpoint, self._version_dir(self.version))
            except (urllib.error.URLError, OSError, ValueError) as error:
                self.errors[endpoint] = _reason(error)
                continue
            with self._lock:
                self.versions[endpoint] = self.version
                self.live.append(endpoint)
                del self._dead_since[endpoint]
            self.log(f"{self.label}={endpoint} is back, with weights version {self.version}")

    # ---- weights ------------------------------------------------------------------------------------------

    def sync_weights(self, model) -> None:
        """Write the policy's weights once, have every live server reload them in place, bump the version."""
        from safetensors.torch import save_file

        start = time.perf_counter()
        version = self.version + 1
        directory = self._version_dir(version)
        directory.mkdir(parents=True, exist_ok=True)
        # clones: tied tensors (embeddings and lm_head) share storage, which save_file refuses; vLLM skips the
        # tied lm_head when loading
        state = {name: tensor.detach().to("cpu").contiguous().clone() for name, tensor in model.state_dict().items()}
        save_file(state, str(directory / "model.safetensors"))
        loads = {endpoint: self._pool.submit(self._load, endpoint, directory) for endpoint in list(self.live)}
        for endpoint, future in loads.items():
            try:
                future.result(timeout=self.timeout_s)
            except Exception as error:  # noqa: BLE001 -- a server that cannot load is a dead server
                self._mark_dead(endpoint, error)
            else:
                with self._lock:
                    self.versions[endpoint] = version
        with self._lock:
            self.version = version
        if not self._current():
            raise ServerError(f"{self.label}: no server took weights version {version}; errors: {self.errors}")
        shutil.rmtree(self._version_dir(version - 1), ignore_errors=True)
        self.last_sync_s = time.perf_counter() - start

    def _version_dir(self, version: int) -> Path:
        return self.weights_dir / f"v{version}"

    def _load(self, endpoint: str, directory: Path) -> None:
        root = endpoint.removesuffix("/v1")
        self._call(f"{root}/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(directory)},
                                              "timeout": self.timeout_s})
        self._call(f"{root}/reset_prefix_cache", {})

    def shutdown(self) -> None:
        """Stop the servers this engine started and drop the weight files; safe to call twice."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in self.processes:
            process.stop()
        self.processes = []
        for directory in self.owned_dirs + ([self.weights_dir] if self._own_weights_dir else []):
            shutil.rmtree(directory, ignore_errors=True)
        atexit.unregister(self.shutdown)


def _reason(error: BaseException) -> str:
    if isinstance(error, urllib.error.HTTPError):
        try:
            detail = error.read().decode(errors="replace")[:300]
        except OSError:
            detail = ""
        return f"HTTP {error.code}: {detail}"
    if isinstance(error, urllib.error.URLError):
        return f"{type(error.reason).__name__}: {error.reason}"
    return f"{type(error).__name__}: {error}"
