"""The sandbox interface: `run(program, stdin, limits) -> Execution`, whatever the backend.

`program` is Python source, run as `python3 main.py` in an empty, private working directory with
`stdin` on its standard input. With a `Checker`, a second, trusted program runs beside it under
another user and talks to it over two pipes; the checker's verdict comes back in
`Execution.verdict` through a channel the program never holds (see agent/supervisor.py). Backends: `docker` (default; see docker_backend.py for what it
enforces) and `local` (namespaces and rlimits, for machines without Docker; weaker, see
sandboxes/README.md), built by name in factory.py. Nothing here imports a backend, verifiers, envs
or the trainer.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace
from importlib.resources import files
from typing import Any, Protocol

from rlvr.sandboxes.agent.clock import BACKSTOP

MiB = 1 << 20
STDERR_CAP = 64 * 1024  # a supervisor's own stderr kept on the host; past it the sandbox is dirty
HOST_GRACE_S = 10.0  # beyond a run's longest time, for the supervisor to kill, wipe and reply before the host does


def host_timeout_s(limits: Limits) -> float:
    """How long the host waits for a supervisor's reply before it kills the sandbox: the run clock's backstop
    (agent/clock.py: BACKSTOP x wall_s, or deadline_s when sooner, however long the run waited) plus HOST_GRACE_S."""
    return min(BACKSTOP * limits.wall_s, limits.deadline_s or float("inf")) + HOST_GRACE_S


def reply_cap(limits: Limits) -> int:
    """The longest honest supervisor reply: stdout, stderr and verdict at their caps, each byte
    JSON-escaped (at most 6 bytes), plus 1 MiB; the host reads no more than this."""
    return 6 * 3 * int(limits.output_bytes) + MiB


def ipc_sysctls(limits: Limits) -> dict[str, str]:
    """A run's IPC namespace bounded like a tmpfs: SysV shared memory at most `tmpfs_bytes` in all, few segments,
    small message queues (the kernel defaults are practically unbounded). Both backends set these."""
    return {"kernel.shmmax": str(int(limits.tmpfs_bytes)), "kernel.shmall": str(int(limits.tmpfs_bytes) // 4096),
            "kernel.shmmni": "32", "kernel.msgmni": "32", "kernel.msgmnb": "65536", "kernel.msgmax": "8192"}


class ExecStatus(str, enum.Enum):
    """How a run ended. EXITED means the program ended on its own (any exit code, or a signal)."""

    EXITED = "exited"
    TIMEOUT = "timeout"  # CPU time, or wall time not spent waiting for a CPU (agent/clock.py)
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"  # stdout/stderr past the cap, or a file past the size/disk cap
    ERROR = "error"  # the sandbox itself failed; says nothing about the program


@dataclass(frozen=True)
class Limits:
    """Per-run limits. Sizes in bytes, times in seconds.

    `memory_bytes`, `pids` and `cpus` are properties of a Docker container, so the warm pool keeps
    containers per distinct triple; the rest apply per run.
    """

    wall_s: float = 10.0  # time not spent waiting for a CPU; any run ends at BACKSTOP x this (agent/clock.py)
    cpu_s: float = 10.0  # the program's CPU time, its processes summed, not the checker's (and RLIMIT_CPU on each)
    memory_bytes: int = 512 * MiB  # address space of the program; the container gets this + agent headroom
    output_bytes: int = 1 * MiB  # each of stdout and stderr
    file_bytes: int = 16 * MiB  # largest file the program may write
    tmpfs_bytes: int = 64 * MiB  # the whole writable workdir (and /tmp)
    pids: int = 64  # processes and threads in the sandbox, supervisor included
    cpus: float = 1.0
    deadline_s: float | None = None  # plain elapsed time after which the run ends, waiting or not (a turn's budget)

    def __post_init__(self):
        for name, value in asdict(self).items():
            if name == "deadline_s" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")

    def with_(self, **changes: Any) -> Limits:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Execution:
    """The result of one run. `exit_code` is negative for a signal, None when the program never ran."""

    stdout: str
    stderr: str
    exit_code: int | None
    status: ExecStatus
    wall_s: float
    cpu_s: float
    peak_memory_bytes: int
    verdict: str = ""  # what a checker wrote to its verdict channel (empty without a checker)
    checker_exit_code: int | None = None
    checker_stderr: str = ""

    @property
    def ok(self) -> bool:
        """The program ended on its own with exit code 0."""
        return self.status is ExecStatus.EXITED and self.exit_code == 0

    @classmethod
    def from_agent(cls, reply: dict[str, Any]) -> Execution:
        return cls(
            stdout=reply.get("stdout", ""), stderr=reply.get("stderr", ""), exit_code=reply.get("exit_code"),
            status=ExecStatus(reply.get("status", "error")), wall_s=float(reply.get("wall_s", 0.0)),
            cpu_s=float(reply.get("cpu_s", 0.0)), peak_memory_bytes=int(reply.get("peak_memory_bytes", 0)),
            verdict=str(reply.get("verdict", "")), checker_exit_code=reply.get("checker_exit_code"),
            checker_stderr=str(reply.get("checker_stderr", "")),
        )

    @classmethod
    def failure(cls, message: str, status: ExecStatus = ExecStatus.ERROR, wall_s: float = 0.0,
                exit_code: int | None = None) -> Execution:
        """A run the sandbox could not complete normally; `message` goes to stderr."""
        return cls("", message, exit_code, status, wall_s, 0.0, 0)


@dataclass(frozen=True)
class Checker:
    """A trusted program run beside the untrusted one, in a forked copy of the supervisor's interpreter
    under its own user (treat its source as public; the code verifier's is), with `input` on its
    stdin, which the program cannot read.
    Its fds 3/4 are the read/write ends of pipes from/to the program's fds 4/3; its fd 5 is the
    verdict channel. The run ends when the checker exits."""

    program: str
    input: str = ""


_AGENT_SOURCE: str | None = None


def agent_source() -> str:
    """The supervisor as one program for `python3 -c`: the sources of the agent package's reset.py, counters.py,
    clock.py, process.py, then supervisor.py (agent/__init__.py says why in that order)."""
    global _AGENT_SOURCE
    if _AGENT_SOURCE is None:
        folder = files("rlvr.sandboxes.agent")
        parts = ("reset.py", "counters.py", "clock.py", "process.py", "supervisor.py")
        _AGENT_SOURCE = "\n\n".join(folder.joinpath(name).read_text() for name in parts)
    return _AGENT_SOURCE


class Sandbox(Protocol):
    """What every backend offers. Safe to call `run` from several threads at once."""

    def run(self, program: str, stdin: str = "", limits: Limits | None = None,
            checker: Checker | None = None) -> Execution: ...

    def close(self) -> None: ...

