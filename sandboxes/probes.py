"""Adversarial programs, one property each, shared by `rlvr sandbox doctor` and the tests.

Each probe is a program plus the statuses it must end with and a check of what it printed.
`ProbeContext` carries what some probes need from the host: the port of a listener the caller
opened on the host's 127.0.0.1 (the sandbox must not reach it) and a secret the caller put in
its own environment (the sandbox must not see it). No probe sends traffic anywhere else.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from rlvr.sandboxes.base import MiB, Execution, ExecStatus, Limits

SECRET_VAR = "RLVR_PROBE_SECRET"
SHORT = Limits(wall_s=2.0, cpu_s=2.0)


@dataclass
class ProbeContext:
    port: int
    secret: str
    host_path: str  # a file on the host that must not be readable inside the sandbox


@dataclass(frozen=True)
class Probe:
    name: str
    program: Callable[[ProbeContext], str]
    expect: frozenset[ExecStatus]
    check: Callable[[Execution, ProbeContext], str | None] = lambda e, c: None  # a problem, or None
    limits: Limits = SHORT
    backends: tuple[str, ...] = ("docker", "local")
    note: str = ""

    def judge(self, execution: Execution, ctx: ProbeContext) -> str | None:
        """None when contained as expected, else what went wrong."""
        if execution.status not in self.expect:
            return f"status {execution.status.value}, expected {'/'.join(sorted(s.value for s in self.expect))}: {execution.stderr[-300:]}"
        return self.check(execution, ctx)


def _stdout_has(marker: str) -> Callable[[Execution, ProbeContext], str | None]:
    return lambda e, c: None if marker in e.stdout else f"expected {marker!r} in stdout, got {e.stdout[-200:]!r} / {e.stderr[-300:]!r}"


def _no_secret(e: Execution, ctx: ProbeContext) -> str | None:
    if ctx.secret in e.stdout or ctx.secret in e.stderr:
        return "the host's secret is visible inside the sandbox"
    return None if "checked" in e.stdout else f"probe did not finish: {e.stderr[-300:]!r}"


EXITED = frozenset({ExecStatus.EXITED})
TIMEOUT = frozenset({ExecStatus.TIMEOUT})

PROBES: tuple[Probe, ...] = (
    Probe("fork bomb", lambda c: (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"),
        TIMEOUT, note="pids limit / RLIMIT_NPROC, then every process killed"),
    Probe("8 GB allocation", lambda c: "b = bytearray(8 * 1024 ** 3)\nb[::4096] = b'x' * len(b[::4096])\n",
          frozenset({ExecStatus.MEMORY_LIMIT})),
    Probe("memory growth", lambda c: "x = []\nwhile True:\n    x.append(b'x' * 10 ** 7)\n",
          frozenset({ExecStatus.MEMORY_LIMIT})),
    Probe("infinite loop", lambda c: "while True:\n    pass\n", TIMEOUT),
    Probe("sleep(1000)", lambda c: "import time\ntime.sleep(1000)\n", TIMEOUT),
    Probe("1 GB to stdout", lambda c: (
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"),
        frozenset({ExecStatus.OUTPUT_LIMIT}),
        check=lambda e, c: None if len(e.stdout) <= SHORT.output_bytes else "stdout was not capped"),
    Probe("2 GB file write", lambda c: (
        "chunk = b'x' * (1 << 20)\nwith open('big', 'wb') as f:\n    for _ in range(2048):\n        f.write(chunk)\n"),
        frozenset({ExecStatus.OUTPUT_LIMIT})),
    Probe("connect to host 127.0.0.1", lambda c: (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {c.port}), timeout=1)\n    print('CONNECTED')\n"
        "except OSError as e:\n    print('blocked', type(e).__name__)\n"
        "print('interfaces', sorted(n for _, n in socket.if_nameindex()))\n"),
        EXITED, check=lambda e, c: (
            "the sandbox reached the host's listener" if "CONNECTED" in e.stdout
            else None if "blocked" in e.stdout and "interfaces ['lo']" in e.stdout
            else f"unexpected output {e.stdout!r} {e.stderr[-200:]!r}")),
    Probe("host environment secret", lambda c: (
        "import os\nprint(dict(os.environ))\n"
        "for p in ('/proc/1/environ', '/proc/self/environ', '/proc/1/cmdline'):\n"
        "    try:\n        print(open(p, 'rb').read())\n    except OSError as e:\n        print(p, e)\n"
        "print('checked')\n"),
        EXITED, check=_no_secret),
    Probe("read host files", lambda c: (
        f"try:\n    open({c.host_path!r}).read()\n    print('READ')\nexcept OSError as e:\n    print('blocked', e)\n"),
        EXITED, check=lambda e, c: None if "blocked" in e.stdout else "a host file was readable",
        backends=("docker",), note="local backend: the host filesystem is visible"),
    Probe("write outside the workdir", lambda c: (
        "import os\nprint('uid', os.getuid())\n"
        "for p in ('/usr/lib/evil', '/etc/evil'):\n"
        "    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n    except OSError as e:\n        print('blocked', p)\n"),
        EXITED, check=lambda e, c: (
            "could write outside the workdir" if "WROTE" in e.stdout or "uid 0" in e.stdout else None)),
    Probe("os._exit(0) at import", lambda c: "import os\nos._exit(0)\nprint('unreachable')\n", EXITED,
          check=lambda e, c: None if e.exit_code == 0 and "unreachable" not in e.stdout else "unexpected run"),
    Probe("kill the parent / PID 1", lambda c: (
        "import os, signal\nfor sig in (signal.SIGTERM, signal.SIGKILL):\n"
        "    for pid in (1, os.getppid()):\n        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass\n"
        "print('still here')\n"),
        frozenset({ExecStatus.EXITED}), note="may kill its supervisor: reported as a crash, container replaced"),
    Probe("background process outlives the run", lambda c: (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(1000)\n    os._exit(0)\nprint('spawned')\n"),
        EXITED, check=_stdout_has("spawned"), note="killed after the run; the next run sees no stray process"),
    Probe("deep recursion", lambda c: (
        "import sys\nsys.setrecursionlimit(10 ** 8)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n"),
        frozenset({ExecStatus.EXITED, ExecStatus.MEMORY_LIMIT, ExecStatus.TIMEOUT}),
        check=lambda e, c: None if e.exit_code != 0 else "deep recursion exited 0",
        note="Python 3.11 frames live on the heap: it ends at a limit or crashes, never escapes"),
    Probe("swallow BaseException", lambda c: (
        "import time\nwhile True:\n    try:\n        time.sleep(1000)\n    except BaseException:\n        pass\n"),
        TIMEOUT),
)

# Run after any probe in the same pool: nothing of the previous run may be alive or left on disk.
AFTERMATH = (
    "import os\nme, parent = os.getpid(), os.getppid()\n"
    "others = []\nfor p in os.listdir('/proc'):\n"
    "    if p.isdigit() and int(p) not in (1, me, parent):\n"
    "        try:\n            state = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0]\n"
    "        except OSError:\n            continue\n"
    "        if state != 'Z':\n            others.append(open(f'/proc/{p}/cmdline').read())\n"
    "print('others', others)\nprint('files', sorted(os.listdir('.')), sorted(f for f in os.listdir('/tmp') if f != 'sandbox'))\n"
)


def aftermath_problem(execution: Execution) -> str | None:
    """None when the follow-up run saw a clean sandbox."""
    if not execution.ok:
        return f"the next run failed: {execution.status.value} {execution.stderr[-300:]}"
    if "others []" not in execution.stdout:
        return f"processes left from the previous run: {execution.stdout}"
    if "files ['main.py'] []" not in execution.stdout:
        return f"files left from the previous run: {execution.stdout}"
    return None


@dataclass
class HostFixtures:
    """A listener on the host's 127.0.0.1 that counts connections, and a secret in os.environ."""

    ctx: ProbeContext = field(init=False)
    connections: int = 0

    def __enter__(self) -> HostFixtures:
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(8)
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()
        self._old = os.environ.get(SECRET_VAR)
        secret = secrets.token_hex(16)
        os.environ[SECRET_VAR] = secret
        self.ctx = ProbeContext(self._server.getsockname()[1], secret, os.path.abspath(__file__))
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._server.close()
        if self._old is None:
            os.environ.pop(SECRET_VAR, None)
        else:
            os.environ[SECRET_VAR] = self._old


def probe_limits(probe: Probe) -> Limits:
    return probe.limits.with_(memory_bytes=256 * MiB)


def run_probe(sandbox, probe: Probe, host: HostFixtures) -> tuple[Execution, str | None]:
    """Run `probe`, then the clean-up check, in `sandbox`: its execution and the first problem found
    (the probe's own verdict, a connection to the host listener, or what the next run found left over)."""
    limits = probe_limits(probe)
    execution = sandbox.run(probe.program(host.ctx), "", limits)
    problem = probe.judge(execution, host.ctx)
    if problem is None and host.connections:
        problem = "the host listener received a connection"
    return execution, problem or aftermath_problem(sandbox.run(AFTERMATH, "", limits))
