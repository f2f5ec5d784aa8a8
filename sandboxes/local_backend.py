"""Local backend: the same supervisor (agent.py), one per run, in fresh Linux namespaces.

For machines without Docker. Each run is `unshare --pid --net --mount --ipc --uts --fork
--mount-proc` around the supervisor: a private PID namespace (every process of the run dies with
it), a network namespace with only a loopback that is down, private tmpfs mounts on /tmp (which
holds the workdir). Run as root, the program itself runs as uid 65534 with RLIMIT_NPROC; run as
an ordinary user, a user namespace is added (`--user --map-root-user`) and the program keeps
that user's rights on every host file it can see. Per-run rlimits (CPU, address space, file
size, open files), the wall clock and the output cap are the supervisor's, as in Docker.

What this does NOT protect against (also in sandboxes/README.md): the host's filesystem is
visible, readable where permissions allow, and writable by an unprivileged user's runs; no
cgroup bounds total memory (only per-process address space) or process count for a non-root
user; kernel attack surface is the full syscall set (no seccomp); CPU quota is per process
(RLIMIT_CPU), not per run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from importlib.resources import as_file, files

from rlvr.sandboxes.base import Execution, ExecStatus, Limits

HOST_GRACE_S = 10.0
UNPRIVILEGED_UID = 65534


class LocalSandbox:
    """`run(program, stdin, limits)` under unshare + rlimits; `workers` bounds concurrent runs."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None, python: str | None = None):
        if shutil.which("unshare") is None:
            raise RuntimeError("the local sandbox needs `unshare` (util-linux)")
        self.limits = limits or Limits()
        self.python = python or (shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
        self.root = os.geteuid() == 0
        self._slots = threading.BoundedSemaphore(workers or os.cpu_count() or 2)
        self._agent = as_file(files("rlvr.sandboxes").joinpath("agent.py")).__enter__()

    def command(self, limits: Limits) -> list[str]:
        config = {
            "workdir": "/tmp/sandbox", "mount_tmpfs": True, "tmpfs_bytes": int(limits.tmpfs_bytes),
            "one_job": True, "python": self.python,
            "drop_to_uid": UNPRIVILEGED_UID if self.root else None,
        }
        namespaces = ["--pid", "--net", "--mount", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
        if not self.root:
            namespaces = ["--user", "--map-root-user", *namespaces]
        return ["unshare", *namespaces, "--", self.python, "-I", "-S", str(self._agent), json.dumps(config)]

    def run(self, program: str, stdin: str = "", limits: Limits | None = None) -> Execution:
        limits = limits or self.limits
        job = {"program": program, "stdin": stdin, "limits": {**limits.to_json(), "nproc": limits.pids if self.root else 0}}
        with self._slots:
            start = time.monotonic()
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
            proc = subprocess.Popen(self.command(limits), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=True)
            try:
                out, err = proc.communicate(json.dumps(job).encode() + b"\n", timeout=limits.wall_s + HOST_GRACE_S)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return Execution.failure("sandbox: no reply in time; killed", ExecStatus.TIMEOUT,
                                         time.monotonic() - start)
            except BaseException:
                _kill(proc)
                raise
        line = out.split(b"\n", 1)[0]
        if not line:
            return Execution.failure(f"local sandbox failed (exit {proc.returncode}): {err.decode(errors='replace')[-500:]}",
                                     wall_s=time.monotonic() - start)
        return Execution.from_agent(json.loads(line))

    def close(self) -> None:
        """Nothing persists between local runs."""


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    proc.wait()
