"""Warm containers reused across runs, bounded concurrency, and a janitor for leaked containers.

A container is checked out for one run at a time. After a clean run (the supervisor reports
`dirty: false`: no limit hit, no process left over, workdir wiped) it goes back to the idle list;
otherwise it is removed and a fresh one is started in the background for the next caller, who
waits for that one rather than starting a second (so a pool of size N holds N containers).
Containers are keyed by their container-level limits (memory, pids, cpus, tmpfs), since those
are fixed when a container is created.

Every container carries the label `rlvr.sandbox.owner=<host>:<pid>:<process start time>`.
`sweep_leaked` removes containers whose owner process is gone (a crashed or killed rlvr); the
pool runs it when it starts, and removes its own containers on `close()`, at interpreter exit,
and when a batch is interrupted. Containers also remove themselves if their owner dies: the
supervisor exits when its stdin (the owner's attach socket) closes, and they are `--rm`.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

LABEL = "rlvr.sandbox"
OWNER_LABEL = "rlvr.sandbox.owner"
INSTANCE_LABEL = "rlvr.sandbox.instance"
REFILL_WAIT_S = 60.0  # longest a checkout waits for an in-flight refill before starting its own container


def owner_id(pid: int | None = None) -> str:
    """`<host>:<pid>:<start time>`: names a process uniquely even after its pid is reused."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "?"


def owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname():
        return True  # another host sharing this engine: not ours to judge
    return pid.isdigit() and _start_time(int(pid)) == started and started != "?"


def list_sandboxes(client, label: str = LABEL) -> list[dict]:
    """Containers carrying `label` (or `label=value`), as the engine's summaries: {"Id", "Labels", ...}.

    The low-level call: the SDK's `containers.list` inspects each one and fails on a container
    that `--rm` removes in between.
    """
    return client.api.containers(all=True, filters={"label": label})


def sweep_leaked(client, everything: bool = False) -> list[str]:
    """Remove rlvr sandbox containers whose owner process is gone (all of them when `everything`)."""
    removed = []
    for container in list_sandboxes(client):
        owner = (container.get("Labels") or {}).get(OWNER_LABEL, "")
        if everything or not owner_alive(owner):
            _remove_quietly(client, container["Id"])
            removed.append(container["Id"][:12])
    return removed


REMOVAL_WAIT_S = 30  # how long removal waits for a removal the engine already has in progress


def _remove_quietly(client, container_id: str) -> None:
    """Remove the container and return once it is gone (a container that exited on its own is being
    removed by --rm already: wait for that, bounded, so the pool never counts one that is on its way out)."""
    import docker

    try:
        client.api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: removal already in progress (--rm)
            raise
        try:
            client.api.wait(container_id, timeout=REMOVAL_WAIT_S, condition="removed")
        except docker.errors.NotFound:
            pass


class WarmPool:
    """At most `size` containers in use at once; idle ones are kept for reuse (`warm=False`: never)."""

    def __init__(self, create: Callable[[Hashable], Any], size: int, warm: bool = True):
        if size < 1:
            raise ValueError(f"pool size must be >= 1, got {size}")
        self._create = create  # key -> a started container object with .destroy()
        self.size, self.warm = size, warm
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: dict[Hashable, list[Any]] = {}
        self._live: set[Any] = set()
        self._changed = threading.Condition(self._lock)  # notified when a refill lands or fails
        self._refills: set[threading.Thread] = set()
        self._pending: dict[Hashable, int] = {}  # refills in flight per key
        self._closed = False
        atexit.register(self.close)

    @contextmanager
    def container(self, key: Hashable) -> Iterator[Any]:
        """Check out a container for `key`; set `.dirty = True` on it to have it replaced afterwards."""
        self._slots.acquire()
        box = None
        try:
            box = self._take_idle(key) or self._track(self._create(key))
            box.dirty = not self.warm
            yield box
        finally:
            if box is not None:
                self._give_back(key, box)
            self._slots.release()

    def warmup(self, key: Hashable, n: int | None = None) -> None:
        """Start containers for `key` until `n` (default: the pool size) are idle, in parallel."""
        with self._lock:
            have = len(self._idle.get(key, []))
        threads = [self._start_refill(key) for _ in range(max(0, min(n or self.size, self.size) - have))]
        for t in threads:
            t.join()

    def close(self) -> None:
        """Remove every container this pool started; the pool refuses new runs afterwards."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            refills = list(self._refills)
        for t in refills:
            t.join(timeout=30)
        with self._lock:
            boxes, self._live, self._idle = list(self._live), set(), {}
        for box in boxes:
            box.destroy()

    def _track(self, box: Any) -> Any:
        with self._lock:
            if self._closed:
                box.destroy()
                raise RuntimeError("sandbox pool is closed")
            self._live.add(box)
        return box

    def _take_idle(self, key: Hashable) -> Any | None:
        """An idle container for `key`; if none but a refill for it is in flight, wait for that one.

        Waiting keeps the pool at `size` containers: without it a checkout right after a dirty run
        starts its own container while the refill starts another, and one of them is thrown away.
        The wait is bounded (REFILL_WAIT_S) so a stuck engine call cannot hold a checkout forever.
        """
        deadline = time.monotonic() + REFILL_WAIT_S
        with self._changed:
            while True:
                if self._closed:
                    raise RuntimeError("sandbox pool is closed")
                idle = self._idle.get(key)
                if idle:
                    return idle.pop()
                left = deadline - time.monotonic()
                if not self._pending.get(key) or left <= 0:
                    return None
                self._changed.wait(timeout=left)

    def _give_back(self, key: Hashable, box: Any) -> None:
        if not box.dirty and self.warm:
            with self._lock:
                if not self._closed:
                    self._idle.setdefault(key, []).append(box)
                    self._trim_idle(keep=key)
                    return
        with self._lock:
            self._live.discard(box)
            closed = self._closed
        box.destroy()
        if self.warm and not closed:
            self._start_refill(key)

    def _start_refill(self, key: Hashable) -> threading.Thread:
        t = threading.Thread(target=self._refill, args=(key,), daemon=True)
        with self._lock:  # started under the lock: `close` never sees (and joins) a thread not yet started
            self._refills.add(t)
            self._pending[key] = self._pending.get(key, 0) + 1
            t.start()
        return t

    def _refill(self, key: Hashable) -> None:
        box = None
        try:
            box = self._create(key)
        except Exception:  # the next checkout creates one itself and reports the error there
            pass
        with self._changed:  # one step: a waiting checkout never sees "no refill and no idle box"
            self._refills.discard(threading.current_thread())
            self._pending[key] -= 1
            self._changed.notify_all()
            if box is None:
                return
            if not self._closed:
                self._live.add(box)
                self._idle.setdefault(key, []).append(box)
                self._trim_idle(keep=key)
                return
        box.destroy()

    def _trim_idle(self, keep: Hashable) -> None:
        """Keep at most `size` idle containers, dropping those of other keys first (lock held)."""
        while sum(len(v) for v in self._idle.values()) > self.size:
            other = next((k for k, v in self._idle.items() if v and k != keep), keep)
            box = self._idle[other].pop(0)
            self._live.discard(box)
            threading.Thread(target=box.destroy, daemon=True).start()
