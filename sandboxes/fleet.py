"""Several Docker engines behind one sandbox: which engine takes the next run, and which are down.

Each engine (a `sandbox.hosts` entry, hosts.py) has its own client and its own warm pool of `pool_size`
containers (pool.py), so a sandbox over N hosts runs up to N x pool_size programs at once. A run goes to
the engine with the fewest runs in flight, ties to the one that has taken fewest runs so far (so even
one-at-a-time callers alternate). Every container is created by the same call on every engine
(docker_backend.AgentContainer), with the same hardening.

An engine that goes away (its stream breaks, or no reply comes, or an engine call fails, and then it does
not answer a ping either) is marked down for the life of the sandbox with one log line naming it; the run
it was doing carries no verdict and is run again on another engine. When none is left, SandboxUnavailable.
A run whose engine still answers is judged as before: the program's own failure stays its failure.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rlvr.sandboxes.hosts import SandboxUnavailable, describe

log = logging.getLogger("rlvr.sandboxes")


class Engine:
    """One Docker engine: its host string, SDK client and warm pool."""

    def __init__(self, host: str, client: Any, pool: Any):
        self.host, self.client, self.pool = host, client, pool
        self.in_flight = self.served = 0
        self.down = False

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

    def __init__(self, engines: list[Engine]):
        self.engines = engines
        self._lock = threading.Lock()

    @contextmanager
    def checkout(self) -> Iterator[Engine]:
        with self._lock:
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

    def mark_down(self, engine: Engine, why: str) -> None:
        """Take `engine` out of service (once; one log line) and remove what is left of its pool, in the background."""
        with self._lock:
            if engine.down:
                return
            engine.down = True
            left = sum(not e.down for e in self.engines)
        log.warning("sandbox host %s is down (%s); its runs go to the %d other host(s)",
                    describe(engine.host), why[:200], left)
        threading.Thread(target=engine.pool.close, daemon=True, name="rlvr-sandbox-down").start()

    def close(self) -> None:
        for engine in self.engines:
            engine.pool.close()

    def up(self) -> list[str]:
        return [e.host for e in self.engines if not e.down]
