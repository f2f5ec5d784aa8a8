"""Requests to an OpenAI-compatible server (`/v1/chat/completions` or `/v1/completions`), with limits that hold
whatever the server does.

Limits: each request has a total deadline of `timeout` seconds (the socket timeout bounds each read, and the
response is read in pieces with the deadline checked between them, so a server that trickles bytes cannot hold a
request longer), a reply is at most `MAX_REPLY_BYTES`, and a batch has a deadline of `batch_timeout` seconds: the
caller stops waiting then and every request not answered is `timeout`. The requests run on `concurrency` daemon
threads (a server batches concurrent requests itself: vLLM's continuous batching); a thread still blocked when the
batch gives up ends within `timeout` on its own, and being a daemon it never holds the process at exit.

Cache: a reply that parsed as a verdict is kept under the hash of everything that decides it (URL, endpoint, the
request body: model, prompt, sampling settings), so the same (prompt, completion) is never judged twice in a run;
errors and timeouts are not kept, so they are asked again. Identical requests within one batch are sent once.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import queue
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

MAX_REPLY_BYTES = 1 << 20
CACHE_ENTRIES = 200_000


@dataclass(frozen=True)
class Reply:
    """One request's outcome: `status` ok | timeout | error; `text` the model's reply when ok, `error` else."""

    status: str
    text: str = ""
    error: str = ""


class JudgeClient:
    """Posts prompts to `url` (a base URL ending in /v1) as chat or completion requests; see the module docstring."""

    def __init__(self, url: str, model: str, api: str = "chat", max_tokens: int = 8, temperature: float = 0.0,
                 timeout: float = 60.0, batch_timeout: float = 600.0, concurrency: int = 8,
                 api_key_env: str | None = None, seed: int = 0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"url must be http(s)://HOST[:PORT]/v1, got {url!r}")
        self.url, self.model, self.api = url.rstrip("/"), model, api
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self.timeout, self.batch_timeout, self.concurrency = timeout, batch_timeout, concurrency
        self.api_key_env = api_key_env
        self._parsed = parsed
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.requests_sent = 0  # what the server was asked, for tests and the logs
        self.cache_hits = 0

    def body(self, prompt: str) -> dict:
        common = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature,
                  "seed": self.seed, "n": 1}
        if self.api == "chat":
            return {**common, "messages": [{"role": "user", "content": prompt}]}
        return {**common, "prompt": prompt}

    def key(self, prompt: str) -> str:
        text = json.dumps([self.url, self.api, self.body(prompt)], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def remember(self, prompt: str, text: str) -> None:
        """Keep a reply that parsed as a verdict (the verifier decides that, so it calls this)."""
        with self._lock:
            self._cache[self.key(prompt)] = text
            self._cache.move_to_end(self.key(prompt))
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)

    def ask(self, prompts: Sequence[str]) -> list[Reply]:
        """One Reply per prompt, in order, within `batch_timeout` seconds; cached replies are not sent again."""
        replies: dict[int, Reply] = {}
        todo: dict[str, list[int]] = {}  # request key -> the prompts that share it
        with self._lock:
            for i, prompt in enumerate(prompts):
                key = self.key(prompt)
                if key in self._cache:
                    replies[i] = Reply("ok", self._cache[key])
                    self.cache_hits += 1
                else:
                    todo.setdefault(key, []).append(i)
        if todo:
            answered = self._send_all([prompts[indices[0]] for indices in todo.values()])
            for indices, reply in zip(todo.values(), answered):
                for i in indices:
                    replies[i] = reply
        return [replies[i] for i in range(len(prompts))]

    def _send_all(self, prompts: list[str]) -> list[Reply]:
        """Send on up to `concurrency` daemon threads; what is unanswered at the batch deadline is `timeout`."""
        jobs: queue.Queue = queue.Queue()
        for i, prompt in enumerate(prompts):
            jobs.put((i, prompt))
        results: dict[int, Reply] = {}
        done = threading.Condition()

        def work() -> None:
            while True:
                try:
                    i, prompt = jobs.get_nowait()
                except queue.Empty:
                    return
                reply = self.send(prompt)
                with done:
                    results[i] = reply
                    done.notify_all()

        for _ in range(min(self.concurrency, len(prompts))):
            threading.Thread(target=work, daemon=True, name="rlvr-judge").start()
        deadline = time.monotonic() + self.batch_timeout
        with done:
            while len(results) < len(prompts):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                done.wait(left)
            late = Reply("timeout", error=f"no reply within the batch deadline of {self.batch_timeout:g} s "
                                          f"(judge.batch_timeout)")
            out = [results.get(i, late) for i in range(len(prompts))]
        while True:  # the requests not started yet are dropped; those started end within `timeout` on their own
            try:
                jobs.get_nowait()
            except queue.Empty:
                break
        return out

    def send(self, prompt: str) -> Reply:
        """One request under a total deadline of `timeout` seconds."""
        with self._lock:
            self.requests_sent += 1
        deadline = time.monotonic() + self.timeout
        path = urllib.parse.urlsplit(self.url).path + ("/chat/completions" if self.api == "chat" else "/completions")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        host, port = self._parsed.hostname, self._parsed.port
        connection_class = http.client.HTTPSConnection if self._parsed.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(host, port, timeout=self.timeout)
        try:
            connection.request("POST", path, body=json.dumps(self.body(prompt)).encode(), headers=headers)
            response = connection.getresponse()
            data = bytearray()
            while True:
                if time.monotonic() > deadline:
                    return Reply("timeout", error=f"the reply took over {self.timeout:g} s (judge.timeout)")
                if connection.sock is not None:  # each read waits at most what is left of the deadline
                    connection.sock.settimeout(max(0.01, deadline - time.monotonic()))
                piece = response.read1(65536)
                if not piece:
                    break
                data += piece
                if len(data) > MAX_REPLY_BYTES:
                    return Reply("error", error=f"the reply is over {MAX_REPLY_BYTES} bytes")
            if time.monotonic() > deadline:
                return Reply("timeout", error=f"the reply took over {self.timeout:g} s (judge.timeout)")
            if response.status != 200:
                return Reply("error", error=f"HTTP {response.status} from {self.url}: {bytes(data[:300])!r}")
            return self._text(bytes(data))
        except TimeoutError:
            return Reply("timeout", error=f"no reply within {self.timeout:g} s (judge.timeout)")
        except (OSError, http.client.HTTPException) as e:
            return Reply("error", error=f"{type(e).__name__} talking to {self.url}: {e}")
        finally:
            connection.close()

    def _text(self, data: bytes) -> Reply:
        try:
            choice = json.loads(data)["choices"][0]
            text = choice["message"]["content"] if self.api == "chat" else choice["text"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            return Reply("error", error=f"not an OpenAI {self.api} reply ({type(e).__name__}): {data[:300]!r}")
        if not isinstance(text, str):
            return Reply("error", error=f"the reply's text is not a string: {text!r}")
        return Reply("ok", text)

