"""A process pool in which every item runs under a hard wall-clock limit enforced by the parent.

Why not `signal.alarm` (math-verify's default) or `concurrent.futures`: an alarm only works on
the main thread of the main interpreter, so it broke trainers that verify from threads or Ray
actors; a `ProcessPoolExecutor` cannot stop a running task at all. Here the
parent sends one item at a time to each worker over a pipe and waits with a deadline; a worker
that overruns is killed (SIGKILL) and replaced, its item gets `Outcome("timeout")`, and the
other items never notice.

- Items are `fn(*args)`; `fn` must be importable by name (a module-level function), since it is
  pickled by reference. It may also be given as a string "package.module:function", resolved
  in the worker, so the parent need not import heavy modules (SymPy) at all. Results come back
  in input order.
- Workers are fresh interpreters (`python -m rlvr.verifiers.pool FD ...`, a socket pair to talk
  over), not forks: safe when the parent has threads (torch, tqdm, Ray), and unlike
  multiprocessing's spawn/forkserver they never re-run the caller's `__main__`, so a script
  without an `if __name__ == "__main__":` guard works. A worker imports `preload` and then says
  "ready"; an item's clock starts only when a ready worker receives it, so a replacement's
  start-up (about 1 s with SymPy) is never charged to an item.
- `map` may be called from any thread; calls are serialised by a lock (one batch at a time).
- `memory_limit_mb` caps each worker's address space (RLIMIT_AS): an item that allocates past
  it fails with `Outcome("error")` rather than taking the machine down.
- Ctrl-C belongs to the parent: workers run in their own process group (the terminal's SIGINT does not reach
  them) and ignore SIGINT, so an interrupted run prints its own message, not a traceback per worker.
"""

from __future__ import annotations

import importlib
import multiprocessing.connection
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_READY = "__ready__"


@dataclass(frozen=True)
class Outcome:
    """One item's fate: status "ok" (value set), "timeout", or "error" (message in `error`)."""

    status: str
    value: Any = None
    error: str | None = None
    seconds: float = 0.0  # wall time in the worker (ok/error) or until the kill (timeout)


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _worker_main(conn, preload: tuple[str, ...], memory_limit_mb: int | None) -> None:
    if memory_limit_mb:
        import resource

        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for module in preload:
        importlib.import_module(module)
    conn.send(_READY)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, payload = msg
        start = time.perf_counter()
        try:
            fn, args = pickle.loads(payload)  # here, so a function the worker cannot import fails this item only
            if isinstance(fn, str):
                fn = _resolve(fn)
            reply = (task_id, "ok", fn(*args), None)
        except BaseException as error:  # noqa: BLE001 - the parent reports it as this item's error
            reply = (task_id, "error", None, f"{type(error).__name__}: {error}")
        seconds = time.perf_counter() - start
        try:
            conn.send((*reply, seconds))
        except Exception as error:  # an unpicklable result
            conn.send((task_id, "error", None, f"result could not be sent: {type(error).__name__}: {error}", seconds))


def _resolve(name: str) -> Callable[..., Any]:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


class _Worker:
    def __init__(self, preload: tuple[str, ...], memory_limit_mb: int | None):
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvr.verifiers.pool", str(theirs.fileno()), ",".join(preload), str(memory_limit_mb or 0)],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
            process_group=0,  # out of the terminal's foreground group: Ctrl-C reaches the parent alone (see below)
        )
        theirs.close()
        self.conn = multiprocessing.connection.Connection(ours.detach())
        self.ready = False
        self.task: int | None = None
        self.started = 0.0

    def exit_code(self) -> int | None:
        try:
            return self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
            self.proc.wait(timeout=1)
        except Exception:
            pass
        self.kill()


class TimeLimitPool:
    """`workers` processes (None = all cores) running items under a per-item `timeout` (seconds)."""

    def __init__(self, workers: int | None = None, preload: Sequence[str] = (), memory_limit_mb: int | None = None):
        self.workers = default_workers() if workers is None else int(workers)
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers!r}")
        self.preload = tuple(preload)
        self.memory_limit_mb = memory_limit_mb
        self._pool: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.restarts = 0  # workers killed for overrunning or found dead

    def map(self, fn: Callable[..., Any] | str, items: Sequence[tuple], timeout: float,
            progress: Callable[[int], None] | None = None) -> list[Outcome]:
        """`fn(*item)` for each item, each under `timeout` seconds; outcomes in input order."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        with self._lock:
            if self._closed:
                raise RuntimeError("TimeLimitPool is closed")
            return self._map(fn, list(items), float(timeout), progress)

    def _map(self, fn, items, timeout, progress) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(items)
        if not items:
            return []
        while len(self._pool) < min(self.workers, len(items)):
            self._pool.append(self._spawn())
        pending = deque(range(len(items)))
        remaining = len(items)
        while remaining:
            now = time.monotonic()
            for worker in self._pool:
                if worker.ready and worker.task is None and pending:
                    index = pending.popleft()
                    try:
                        worker.conn.send((index, pickle.dumps((fn, items[index]))))
                    except (BrokenPipeError, EOFError, OSError):  # the worker died while idle
                        pending.appendleft(index)
                        self._replace(worker)
                        continue
                    except Exception as error:  # unpicklable function or arguments: nothing was written
                        outcomes[index] = Outcome("error", error=f"arguments could not be sent: {error}")
                        remaining -= 1
                        self._report(progress)
                        continue
                    worker.task, worker.started = index, now
            busy = [w for w in self._pool if w.task is not None]
            deadline = min((w.started + timeout for w in busy), default=now + 1.0)
            waiting = {w.conn: w for w in self._pool if w.task is not None or not w.ready}
            ready = multiprocessing.connection.wait(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
            for conn in ready:
                worker = waiting[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    if worker.task is not None:
                        code = worker.exit_code()
                        outcomes[worker.task] = Outcome(
                            "error", error=f"worker process died (exit code {code})",
                            seconds=time.monotonic() - worker.started)
                        remaining -= 1
                        self._report(progress)
                    self._replace(worker)
                    continue
                if msg == _READY:
                    worker.ready = True
                    continue
                index, status, value, error, seconds = msg
                outcomes[index] = Outcome(status, value, error, seconds)
                worker.task = None
                remaining -= 1
                self._report(progress)
            now = time.monotonic()
            for worker in list(self._pool):
                if worker.task is not None and now >= worker.started + timeout:
                    outcomes[worker.task] = Outcome("timeout", error=f"exceeded {timeout:g} s",
                                                    seconds=now - worker.started)
                    remaining -= 1
                    self._report(progress)
                    self._replace(worker)
        return outcomes  # type: ignore[return-value]

    @staticmethod
    def _report(progress) -> None:
        if progress is not None:
            progress(1)

    def _spawn(self) -> _Worker:
        return _Worker(self.preload, self.memory_limit_mb)

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        self._pool[self._pool.index(worker)] = self._spawn()
        self.restarts += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for worker in self._pool:
                worker.stop()
            self._pool.clear()

    def __enter__(self) -> TimeLimitPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed:
                for worker in self._pool:
                    worker.kill()
        except Exception:
            pass


class PooledWorkers:
    """For a verifier that sends items to a `TimeLimitPool` it owns: the pool made on first use (and again when
    the worker count changes), `close()`, and pickling without it (Ray actors and process pools get their own).
    Its `verify_batch(completions, records, workers=None, progress=None)` is the real entry: one completion is a
    batch of one, and `check_batch` refuses lists of different lengths."""

    pool_preload: tuple[str, ...] = ()
    memory_limit_mb: int | None = None
    _pool: TimeLimitPool | None = None

    def __call__(self, completion, record):
        return self.verify_batch([completion], [record])[0]

    @staticmethod
    def check_batch(completions, records) -> None:
        if len(completions) != len(records):
            raise ValueError(f"{len(completions)} completions but {len(records)} records")

    def worker_pool(self, workers: int) -> TimeLimitPool:
        if self._pool is None or self._pool.workers != workers:
            self.close()
            self._pool = TimeLimitPool(workers, preload=self.pool_preload, memory_limit_mb=self.memory_limit_mb)
        return self._pool

    def close(self) -> None:
        """Stop the worker processes (they also stop with the process)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_pool"] = None
        return state


if __name__ == "__main__":  # a worker: python -m rlvr.verifiers.pool FD PRELOAD MEMORY_MB
    # Ctrl-C is the parent's to handle (rlvr train prints where to resume, then its pools stop their workers); a
    # worker that took it too would print its own traceback over that message. A SIGINT sent to the worker alone is
    # ignored as well; the parent still ends a worker with EOF, SIGKILL or its own exit.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _fd, _preload, _memory = sys.argv[1:4]
    _worker_main(multiprocessing.connection.Connection(int(_fd)),
                 tuple(m for m in _preload.split(",") if m), int(_memory) or None)
