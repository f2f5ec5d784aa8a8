"""Adversarial programs, one property each, shared by `rlvr sandbox doctor` and the tests.

Each probe is a program plus the statuses it must end with and a check of what it printed.
`ProbeContext` carries what some probes need from the host: the port of a listener the caller
opened on the host's 127.0.0.1 and the name of an abstract Unix socket it listens on (the sandbox
must reach neither), a secret the caller put in its own environment (the sandbox must not see
it), and a marker for files a probe tries to leave behind. No probe sends traffic anywhere else.

The probes from "connect to a host abstract Unix socket" on attack the sandbox itself: reach the
supervisor (its fds, memory, signals) to forge or stall its reply, leave state for the next run
(files in every writable place, SysV IPC, POSIX message queues, shared memory, the kernel keyrings
including the uid's persistent one, and the workdir's own inode: its mode, a default ACL, extended
attributes), and make the clean-up fail (a 1,100-deep directory chain). Each is followed by the
AFTERMATH run, which must start and find none of it.

A program longer than a few lines is a file of probe_programs/ (a folder of text, never imported: each attacks
the process that runs it), read here and shipped as its text; the few values the host knows only at run time (the
marker, this machine's syscall numbers) are the lines of the file's header, which `_program` sets.
"""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files

from rlvr.sandboxes.base import ExecStatus, Execution, Limits, MiB

SECRET_VAR = "RLVR_PROBE_SECRET"
SHORT = Limits(wall_s=2.0, cpu_s=2.0)


@dataclass
class ProbeContext:
    port: int
    secret: str
    host_path: str  # a file on the host that must not be readable inside the sandbox
    abstract_socket: str = ""  # name (without the leading NUL) of an abstract Unix socket the host listens on
    marker: str = "rlvr-probe-x"  # name of the files a probe tries to leave in every writable place
    fs_socket: str = ""  # a world-writable Unix socket the host listens on in a directory no sandbox replaces


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

STATE_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
ADD_KEY, KEYCTL = {"aarch64": (217, 219)}.get(platform.machine(), (248, 250))  # syscall numbers (x86_64 default)
KEY_NAME = "rlvr-probe-key"  # a key the state probe adds to its user's kernel keyring


_PROGRAMS = files("rlvr.sandboxes").joinpath("probe_programs")


_HEADER = "# sandboxes/probes.py sets the lines up to the blank one (_program)"


def _program(name: str, **values) -> str:
    """The text of probe_programs/NAME.py, the program the sandbox runs. A file that opens with _HEADER has its
    header set: each `KEY = ...` line above its first blank line becomes `KEY = repr(values[KEY])`, the values the
    host knows only at run time (this run's marker, this machine's syscall numbers). Every header line must be
    given a value and every value must have its line, so a renamed key fails here rather than running a default."""
    text = _PROGRAMS.joinpath(f"{name}.py").read_text(encoding="utf-8")
    if not text.startswith(_HEADER):
        if values:
            raise ValueError(f"probe_programs/{name}.py has no header to set {sorted(values)} in")
        return text
    header, blank, body = text.partition("\n\n")
    lines, missing = header.split("\n"), dict(values)
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            key = line.split(" = ", 1)[0]
            if key not in missing:
                raise ValueError(f"probe_programs/{name}.py: header line {key!r} was given no value")
            lines[i] = f"{key} = {missing.pop(key)!r}"
    if missing:
        raise ValueError(f"probe_programs/{name}.py: no header line for {sorted(missing)}")
    return "\n".join(lines) + blank + body


def _supervisor_reach(c: ProbeContext) -> str:
    """Open every other process's fds and memory, forge a reply and flood stderr through them, ptrace
    and stop them; then outlive the wall limit. Contained: every attempt refused, the run a timeout."""
    return _program("supervisor_reach")


def _leave_state(c: ProbeContext) -> str:
    """Leave a file in every writable place, SysV shared memory (32 MB, touched), a queue and a
    semaphore set, and a POSIX message queue, all named after the marker, for a later run to find; a key in the
    user's keyring and in the uid's persistent one."""
    return _program("leave_state", marker=c.marker, WRITABLE=STATE_PLACES + (".",), ADD_KEY=ADD_KEY, KEYCTL=KEYCTL,
                    KEY_NAME=KEY_NAME)


def _mark_the_workdir(c: ProbeContext) -> str:
    """Mark the inodes of the places themselves, which emptying them keeps: an extended attribute on each, then
    a no-access default ACL and mode 0 on the workdir and its parent, so that a later run could not start."""
    return _program("mark_the_workdir", marker=c.marker, PLACES=STATE_PLACES)


def _nothing_on_host(e: Execution, ctx: ProbeContext) -> str | None:
    if "mq" not in e.stdout:
        return f"probe did not finish: {e.stderr[-300:]!r}"
    left = [d for d in STATE_PLACES if os.path.exists(os.path.join(d, ctx.marker))]
    return f"the program wrote on the host: {left}" if left else None


HOARD_MB = 1536  # what the hoarder tries to hold beyond its address space (a hoarder run held 1.4-1.5 GiB)


def held_bound(limits: Limits) -> int:
    """The most one run may hold on either backend: its address space, six tmpfs places (the local backend's five
    plus SysV segments at ipc_sysctls' cap; Docker has fewer), and 192 MiB for the supervisor and a checker."""
    return int(limits.memory_bytes + 6 * limits.tmpfs_bytes + 192 * MiB)


def _hoard(c: ProbeContext) -> str:
    """Memory no rlimit counts: SysV segments and memfd pages, each touched and then unmapped (RLIMIT_AS only
    counts what is mapped). Prints what it holds as it goes; contained: a refusal or the memory limit first."""
    return _program("hoard", SEGMENTS=HOARD_MB // 16, HOARD_MB=HOARD_MB)


def _held_within_limits(e: Execution, c: ProbeContext) -> str | None:
    held = max([int(line.split()[1]) for line in e.stdout.splitlines() if line.startswith("held")], default=0)
    limit = held_bound(probe_limits(HOARDER))
    return f"held {held} MiB outside the address space (bound {limit >> 20} MiB)" if held * MiB > limit else None


def _connect_fs_socket(c: ProbeContext) -> str:
    return ("import socket\ns = socket.socket(socket.AF_UNIX)\n"
            f"try:\n    s.connect({c.fs_socket!r})\n    print('CONNECTED')\n"
            "except OSError as e:\n    print('blocked', e.errno)\n")


HOARDER = Probe("hold SysV shm and memfd pages outside the address space", _hoard,
                frozenset({ExecStatus.EXITED, ExecStatus.MEMORY_LIMIT}), check=_held_within_limits,
                limits=SHORT.with_(wall_s=10.0, cpu_s=10.0),
                note="ipc_sysctls bound SysV; the container's (docker) or the run's (local) memory cgroup the rest")

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
        note="local: only /usr, a few /etc files and the interpreter are bound"),
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
        frozenset({ExecStatus.EXITED}), note="the supervisor and init are root: the signals are refused"),
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
    Probe("connect to a host abstract Unix socket", lambda c: (
        "import socket\ns = socket.socket(socket.AF_UNIX)\n"
        f"try:\n    s.connect(b'\\0' + {c.abstract_socket.encode()!r})\n    print('CONNECTED')\n"
        "except OSError as e:\n    print('blocked', e.errno)\n"),
        EXITED, check=lambda e, c: (
            "reached the host's abstract Unix socket" if "CONNECTED" in e.stdout
            else None if "blocked" in e.stdout else f"unexpected output {e.stdout!r} {e.stderr[-200:]!r}"),
        note="abstract sockets belong to the network namespace"),
    Probe("connect to a host filesystem socket (as /run/docker.sock)", _connect_fs_socket, EXITED,
          check=lambda e, c: (
              "reached the host's Unix socket" if "CONNECTED" in e.stdout
              else None if "blocked" in e.stdout else f"unexpected output {e.stdout!r} {e.stderr[-200:]!r}"),
          note="only what is bound exists inside (local: bubblewrap's fresh root)"),
    Probe("supplementary groups", lambda c: (
        "print('groups', open('/proc/self/status').read().split('Groups:')[1].split('\\n')[0].split())\n"),
        EXITED, check=lambda e, c: None if "groups []" in e.stdout else f"the program holds groups: {e.stdout!r}",
        note="a group (docker, say) would open what it owns"),
    HOARDER,
    Probe("reach the supervisor: fds, memory, ptrace, SIGSTOP, forged reply", _supervisor_reach, TIMEOUT,
          check=lambda e, c: None if "reached []" in e.stdout else f"reached another process: {e.stdout[-300:]!r}",
          note="supervisor root + non-dumpable, program another user; a forged reply would end the run early"),
    Probe("leave state: files everywhere, SysV IPC, message queue, shared memory", _leave_state, EXITED,
          check=_nothing_on_host, note="wiped, or the sandbox replaced; AFTERMATH checks"),
    Probe("mark the workdir itself: xattrs, default ACL, mode 0", _mark_the_workdir, EXITED,
          check=_stdout_has("marked ['.'"), note="the workdir root is root's; the run's own directory is removed"),
    Probe("1,100-deep directory chain (clean-up must not fail)", lambda c: (
        "import os\nfor i in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "os.chmod('.', 0)\nprint('built')\n"),
        EXITED, check=_stdout_has("built"), note="the bounded wipe gives up: dirty, sandbox replaced, no error"),
)

# Run after any probe in the same pool: nothing of the previous run may be alive or left on disk.
AFTERMATH = _program("aftermath", PLACES=STATE_PLACES, KEYCTL=KEYCTL, KEY_NAME=KEY_NAME)


def aftermath_problem(execution: Execution) -> str | None:
    """None when the follow-up run saw a clean sandbox."""
    if not execution.ok:
        return f"the next run failed: {execution.status.value} {execution.stderr[-300:]}"
    if "others []" not in execution.stdout:
        return f"processes left from the previous run: {execution.stdout}"
    if "files ['main.py'] []" not in execution.stdout:
        return f"files left from the previous run: {execution.stdout}"
    if "state []" not in execution.stdout:
        return f"state left from the previous run: {execution.stdout}"
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
        self._thread = threading.Thread(target=self._accept, args=(self._server,), daemon=True)
        self._thread.start()
        self._old = os.environ.get(SECRET_VAR)
        secret = secrets.token_hex(16)
        os.environ[SECRET_VAR] = secret
        self._abstract = socket.socket(socket.AF_UNIX)
        name = f"rlvr-probe-{secrets.token_hex(6)}"
        self._abstract.bind(b"\0" + name.encode())
        self._abstract.listen(8)
        self._abstract.settimeout(0.2)
        self._abstract_thread = threading.Thread(target=self._accept, args=(self._abstract,), daemon=True)
        self._abstract_thread.start()
        # A world-writable socket where /run/docker.sock lives (/run, not a place any sandbox replaces) when we may.
        self._socket_dir = tempfile.mkdtemp(prefix="rlvr-probe-", dir="/run" if os.access("/run", os.W_OK) else None)
        os.chmod(self._socket_dir, 0o755)
        self._fs_socket = socket.socket(socket.AF_UNIX)
        socket_path = os.path.join(self._socket_dir, "api.sock")
        self._fs_socket.bind(socket_path)
        os.chmod(socket_path, 0o777)
        self._fs_socket.listen(8)
        self._fs_socket.settimeout(0.2)
        self._fs_thread = threading.Thread(target=self._accept, args=(self._fs_socket,), daemon=True)
        self._fs_thread.start()
        self.ctx = ProbeContext(self._server.getsockname()[1], secret, os.path.abspath(__file__), name,
                                f"rlvr-probe-{secrets.token_hex(6)}", socket_path)
        return self

    def _accept(self, server: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._abstract_thread.join()
        self._fs_thread.join()
        self._server.close()
        self._abstract.close()
        self._fs_socket.close()
        shutil.rmtree(self._socket_dir, ignore_errors=True)
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
