"""Local backend: the same supervisor (agent.py), one per run, in fresh Linux namespaces.

For machines without Docker. Each run is `unshare --pid --net --mount --ipc --uts --fork
--mount-proc` around the supervisor: a private PID namespace (every process of the run dies with
it), a network namespace with only a loopback that is down (abstract Unix sockets are per network
namespace, so those are private too), a private IPC namespace. In its mount namespace the
supervisor makes every inherited mount read-only and mounts private size-capped tmpfs on /tmp
(which holds the workdir), /var/tmp, /dev/shm, /run/lock and a fresh /dev/mqueue (agent.py).
Run as root, the program and the checker run under a pair of uids leased for the run alone (UidLeases below)
with RLIMIT_NPROC on the program, and the supervisor is a root process they cannot signal or trace; run as an ordinary user, a user
namespace is added (`--user --map-root-user`) and program, checker and supervisor share one user
(`separate_users` is False: the checker is then NOT out of the program's reach). Per-run rlimits
(CPU, address space, file size, open files), the wall clock and the output cap are the
supervisor's, as in Docker.

What this does NOT protect against (also in sandboxes/README.md): the host's filesystem is
visible and readable where permissions allow; no cgroup bounds total memory (only per-process
address space) or process count for a non-root user; kernel attack surface is the full syscall
set (no seccomp); no CPU quota: a run's CPU time is bounded (the run clock, agent_clock.py, sums its
processes; RLIMIT_CPU per process), not how many cores it uses at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

from rlvr.sandboxes.base import (
    STDERR_CAP,
    Checker,
    ExecStatus,
    Execution,
    Limits,
    agent_source,
    host_timeout_s,
    reply_cap,
)

class UidLeases:
    """A pair of uids (program, checker) that no other run on this host uses while this run holds them.

    RLIMIT_NPROC and the kernel's per-user keyrings are counted per uid across the whole host, not per
    namespace. With one fixed uid (the host's 65534, as before), a concurrent run's processes, or a Docker
    sandbox's (which also runs programs as 65534), used up an honest program's process limit (its fork failed:
    a wrong verdict), and a run could read what another left in the shared keyring while it ran. So each run
    leases slot i of SLOTS: program uid BASE + 2 i, checker uid BASE + 2 i + 1, ids no account or container
    runtime hands out (systemd-nspawn's ranges stay below 0x70000000). The lease is an flock on a file per
    slot, across processes (two rlvr commands on one host), released by the kernel when its holder dies.
    """

    BASE, SLOTS = 2_100_000_000, 128

    def __init__(self, directory: str | None = None, base: int = BASE):
        self.directory = directory or ("/run/lock" if os.access("/run/lock", os.W_OK) else tempfile.gettempdir())
        self.base = base  # program uid of slot 0 (tests lease from a range of their own)

    @contextmanager
    def lease(self):
        """Yield (program uid, checker uid), held until the block ends; waits while every slot is taken."""
        while True:
            for slot in range(self.SLOTS):
                handle = open(os.path.join(self.directory, f"rlvr-sandbox-uid-{slot}.lock"), "a")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                try:
                    yield self.base + 2 * slot, self.base + 2 * slot + 1
                finally:
                    handle.close()  # closing releases the flock
                return
            time.sleep(0.05)


class LocalSandbox:
    """`run(program, stdin, limits)` under unshare + rlimits; `workers` bounds concurrent runs; `leases`: where
    the runs' uids come from (default: the machine-wide UidLeases)."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None, python: str | None = None,
                 leases: UidLeases | None = None):
        if shutil.which("unshare") is None:
            raise RuntimeError("the local sandbox needs `unshare` (util-linux)")
        self.limits = limits or Limits()
        self.python = python or (shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
        self.root = os.geteuid() == 0
        self.separate_users = self.root  # program, checker and supervisor under three users
        self.fs_problem = ""  # what the last run's supervisor could not make private ("" = all of it)
        self._slots = threading.BoundedSemaphore(workers or os.cpu_count() or 2)
        self.leases = leases or UidLeases()

    def command(self, limits: Limits, uids: tuple[int, int] | None = None) -> list[str]:
        """The unshare command line of one run; `uids` (program, checker) as root, from a lease."""
        config = {
            "workdir": "/tmp/sandbox", "mount_tmpfs": True, "tmpfs_bytes": int(limits.tmpfs_bytes),
            "one_job": True, "python": self.python,
            "uids": {"program": uids[0], "checker": uids[1]} if uids else None,
            "clear_keyrings": uids is not None,  # the leased uid's keyrings outlive runs: emptied before and after
        }
        namespaces = ["--pid", "--net", "--mount", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
        if not self.root:
            namespaces = ["--user", "--map-root-user", *namespaces]
        return ["unshare", *namespaces, "--", self.python, "-I", "-S", "-c", agent_source(), json.dumps(config)]

    def run(self, program: str, stdin: str = "", limits: Limits | None = None,
            checker: Checker | None = None) -> Execution:
        limits = limits or self.limits
        job = {"job_id": "local", "program": program, "stdin": stdin,
               "limits": {**limits.to_json(), "nproc": limits.pids if self.root else 0}}
        if checker is not None:
            job["checker"] = {"program": checker.program, "input": checker.input}
        with self._slots, (self.leases.lease() if self.root else _no_lease()) as uids:
            start = time.monotonic()
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
            proc = subprocess.Popen(self.command(limits, uids), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=True)
            try:
                out, err = _exchange(proc, json.dumps(job).encode() + b"\n", host_timeout_s(limits),
                                     reply_cap(limits))
            except TimeoutError:
                _kill(proc)
                return Execution.failure("sandbox: no reply in time; killed", ExecStatus.TIMEOUT,
                                         time.monotonic() - start)
            except BufferError as error:
                _kill(proc)
                return Execution.failure(f"sandbox: {error}; killed", wall_s=time.monotonic() - start)
            except BaseException:
                _kill(proc)
                raise
        line = out.split(b"\n", 1)[0]
        if not line:
            return Execution.failure(f"local sandbox failed (exit {proc.returncode}): {err.decode(errors='replace')[-500:]}",
                                     wall_s=time.monotonic() - start)
        reply = json.loads(line)
        self.fs_problem = reply.get("fs_problem", "")
        return Execution.from_agent(reply)

    def close(self) -> None:
        """Nothing persists between local runs."""


@contextmanager
def _no_lease():
    yield None


def _exchange(proc: subprocess.Popen, job: bytes, timeout: float, cap: int) -> tuple[bytes, bytes]:
    """Write the job, read stdout and stderr until both close: TimeoutError past `timeout`, BufferError
    when stdout passes `cap` bytes or stderr STDERR_CAP (the host never holds more than that)."""
    deadline = time.monotonic() + timeout
    proc.stdin.write(job)
    proc.stdin.close()
    buffers = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    caps = {proc.stdout.fileno(): cap, proc.stderr.fileno(): STDERR_CAP}
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError()
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffers[key.fd] += chunk
                if len(buffers[key.fd]) > caps[key.fd]:
                    raise BufferError(f"the supervisor wrote more than {caps[key.fd]} bytes")
    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    return bytes(buffers[proc.stdout.fileno()]), bytes(buffers[proc.stderr.fileno()])


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    proc.wait()
