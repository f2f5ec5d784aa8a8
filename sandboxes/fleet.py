"""Several Docker engines behind one sandbox: which engine takes the next run, and which are down.

Each engine (a `sandbox.hosts` entry, hosts.py) has its own client and its own warm pool of `pool_size`
containers (pool.py), so a sandbox over N hosts runs up to N x pool_size programs at once. A run goes to
the engine with the fewest runs in flight, ties to the one that has taken fewest runs so far (so even
one-at-a-time callers alternate). Every container is created by the same call on every engine
(docker_backend.AgentContainer), with the same hardening.

An engine that goes away (its stream breaks, or no reply comes, or an engine call fails, and then it does
not answer a ping either) is marked down with one log line naming it; the run it was doing carries no
verdict and is run again on another engine. When none is left, SandboxUnavailable. A run whose engine still
answers is judged as before: the program's own failure stays its failure.

Readmission. A down engine (and one that did not answer when the sandbox started) is tried again, in the
background, at most every `readmit_after_s` seconds (30 by default), when runs are being checked out: the
sandbox's `admit(host)` connects, checks the image and builds a fresh pool, exactly as at start. When that
works, the engine takes runs again, with one log line; until then its runs go elsewhere, and nothing waits
for the probe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlvr.sandboxes.hosts import SandboxUnavailable, describe

log = logging.getLogger("rlvr.sandboxes")

READMIT_AFTER_S = 30.0  # a down engine is tried again at most this often


class DockerHost:
    """One `sandbox.hosts` entry (a Docker engine, not a rollout `Engine`): its host string, SDK client and warm
    pool (None for both while it has never answered)."""

    def __init__(self, host: str, client: Any, pool: Any, down: bool = False):
        self.host, self.client, self.pool = host, client, pool
        self.in_flight = self.served = 0
        self.down = down
        self.retry_at = 0.0  # while down: the monotonic time of the next readmission probe
        self.probing = False

    def answers(self) -> bool:
        """Does the engine answer a ping now (bounded by the client's timeout)?"""
        if self.down:
            return False
        try:
            return bool(self.client.ping())
        except Exception:
            return False


class Fleet:
    """The engines of one sandbox; `checkout()` picks the least loaded that is up."""

    def __init__(self, engines: list[DockerHost], admit: Callable[[str], tuple[Any, Any]] | None = None,
                 readmit_after_s: float = READMIT_AFTER_S):
        self.engines = engines
        self._admit, self.readmit_after_s = admit, readmit_after_s  # admit(host) -> (client, pool), or raises
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def checkout(self) -> Iterator[DockerHost]:
        with self._lock:
            self._probe_due()
            up = [e for e in self.engines if not e.down]
            if not up:
                raise SandboxUnavailable("every sandbox host is down: " + ", ".join(describe(e.host) for e in self.engines)
                                         + "; start an engine there, or set sandbox.hosts to engines that run")
            engine = min(up, key=lambda e: (e.in_flight / e.pool.size, e.served))
            engine.in_flight += 1
            engine.served += 1
        try:
            yield engine
        finally:
            with self._lock:
                engine.in_flight -= 1

    def mark_down(self, engine: DockerHost, why: str) -> None:
        """Take `engine` out of service (once; one log line) and remove what is left of its pool, in the background."""
        with self._lock:
            if engine.down:
                return
            engine.down = True
            engine.retry_at = time.monotonic() + self.readmit_after_s
            left = sum(not e.down for e in self.engines)
        log.warning("sandbox host %s is down (%s); its runs go to the %d other host(s)%s",
                    describe(engine.host), why[:200], left,
                    f"; tried again every {self.readmit_after_s:g} s" if self._admit else "")
        threading.Thread(target=engine.pool.close, daemon=True, name="rlvr-sandbox-down").start()

    def _probe_due(self) -> None:
        """(Under the lock.) Start a background readmission probe for each down engine whose time has come."""
        if self._admit is None or self._closed:
            return
        now = time.monotonic()
        for engine in self.engines:
            if engine.down and not engine.probing and now >= engine.retry_at:
                engine.probing = True
                threading.Thread(target=self._probe, args=(engine,), daemon=True, name="rlvr-sandbox-readmit").start()

    def _probe(self, engine: DockerHost) -> None:
        try:
            client, pool = self._admit(engine.host)  # bounded by the client's timeout
        except Exception:  # still down (or not ready): the next probe is a while away
            with self._lock:
                engine.probing, engine.retry_at = False, time.monotonic() + self.readmit_after_s
            return
        with self._lock:
            if self._closed:  # the sandbox closed while the probe ran: the new pool goes too
                engine.probing = False
                stale = pool
            else:
                stale = None
                engine.client, engine.pool = client, pool
                engine.down = engine.probing = False
        if stale is not None:
            stale.close()
            return
        log.warning("sandbox host %s answers again; runs go to it again", describe(engine.host))

    def close(self) -> None:
        with self._lock:
            self._closed = True
        for engine in self.engines:
            if engine.pool is not None:
                engine.pool.close()

    def up(self) -> list[str]:
        return [e.host for e in self.engines if not e.down]
