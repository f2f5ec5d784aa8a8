"""Local backend: the same supervisor (agent/supervisor.py), one per run, under bubblewrap.

For machines without Docker. Each run is `bwrap --unshare-pid --unshare-net --unshare-ipc --unshare-uts
--die-with-parent` around the supervisor, in a fresh root holding only what is bound (LocalSandbox._filesystem:
/usr read-only, a few /etc files, /proc, a minimal /dev), so no host filesystem socket (/run/docker.sock) exists
inside: a private PID namespace (every process of the run dies with it), a network namespace of its own (abstract
Unix sockets too), a private IPC namespace whose SysV limits the supervisor sets (base.ipc_sysctls). The supervisor
makes every mount read-only and mounts private size-capped tmpfs on /tmp (which holds the workdir), /var/tmp,
/dev/shm, /run/lock and a fresh /dev/mqueue (agent/supervisor.py). Run as root, the program and the checker run under a pair
of uids leased for the run alone (UidLeases below) with RLIMIT_NPROC on the program, the supervisor is a root
process they cannot signal or trace, nobody has supplementary groups, and the run has a memory + pids cgroup of its
own (RunCgroup: memory no rlimit counts, SysV segments and unmapped memfd pages, is bounded by run_memory_bytes).
Run as an ordinary user, a user namespace is added (`--unshare-user --uid 0`) and program, checker and supervisor
share one user (`separate_users` is False: the checker is then NOT out of the program's reach), with the caller's
supplementary groups and no cgroup. Per-run rlimits (CPU, address space, file size, open files), the wall clock and
the output cap are the supervisor's, as in Docker.

What this does NOT protect against (also in sandboxes/README.md and `rlvr sandbox doctor`): what is bound is
readable; kernel attack surface is the full syscall set (no seccomp); without root, no cgroup bounds memory outside
the address space or the process count; no CPU quota: a run's CPU time is bounded (the run clock, agent/clock.py,
reads the run's cgroup as root, else sums its processes and what init reaped; RLIMIT_CPU per process), not how
many cores it uses at once.
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
    MiB,
    ExecStatus,
    Execution,
    Limits,
    agent_source,
    host_timeout_s,
    ipc_sysctls,
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


def run_memory_bytes(limits: Limits) -> int:
    """What one run may hold in all (its cgroup's memory limit): the program's address space, each of the five
    size-capped tmpfs places full, SysV segments up to ipc_sysctls' cap, and the supervisor's and a checker's
    headroom (the Docker backend's container memory, plus /var/tmp, /run/lock and SysV)."""
    return int(limits.memory_bytes + 6 * limits.tmpfs_bytes + AGENT_HEADROOM + CHECKER_HEADROOM)


AGENT_HEADROOM, CHECKER_HEADROOM = 64 * MiB, 128 * MiB  # as docker_backend's


class RunCgroup:
    """A memory + pids cgroup per leased uid (root only), so that memory no rlimit counts (SysV segments, memfd and
    tmpfs pages, pipe buffers) is bounded per run: cgroup v2 under /sys/fs/cgroup/rlvr-local, else v1 beneath this
    process's own memory and pids cgroups. `available()` is False where neither can be made (doctor says so)."""

    V2_ROOT = "/sys/fs/cgroup"

    def __init__(self):
        self.dirs: dict[str, str] = {}  # controller ("memory", "pids", or "" for v2) -> parent directory
        try:
            if os.path.exists(os.path.join(self.V2_ROOT, "cgroup.controllers")):
                base = os.path.join(self.V2_ROOT, "rlvr-local")
                os.makedirs(base, exist_ok=True)
                for parent in (self.V2_ROOT, base):
                    with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                        f.write("+memory +pids")
                self.dirs[""] = base
            else:
                own = dict(line.strip().split(":", 2)[1:] for line in open("/proc/self/cgroup") if line.count(":") >= 2)
                for controller in ("memory", "pids"):
                    base = os.path.join(self.V2_ROOT, controller, own[controller].lstrip("/"), "rlvr-local")
                    os.makedirs(base, exist_ok=True)
                    self.dirs[controller] = base
                self._add_cpuacct(own)
        except (OSError, KeyError, ValueError):
            self.dirs = {}

    def _add_cpuacct(self, own: dict) -> None:
        """v1: a cpuacct cgroup per run too, where the run clock counts the run's CPU (agent/clock.py)."""
        key = next((key for key in own if "cpuacct" in key.split(",")), None)
        try:
            if key is not None:
                base = os.path.join(self.V2_ROOT, key, own[key].lstrip("/"), "rlvr-local")
                os.makedirs(base, exist_ok=True)
                self.dirs["cpuacct"] = base
        except OSError:
            pass  # the clock then sums the run's processes

    def available(self) -> bool:
        return bool(self.dirs)

    @contextmanager
    def for_run(self, name: str, limits: Limits):
        """Yield (cgroup.procs files to join, bwrap arguments that show the run its memory cgroup); the
        cgroup's processes are killed and it is removed afterwards."""
        memory, pids = run_memory_bytes(limits), int(limits.pids) + 8  # + bwrap's init, the supervisor, a checker
        if "" in self.dirs:
            paths = [os.path.join(self.dirs[""], name)]
            settings = {"memory.max": memory, "memory.swap.max": 0, "pids.max": pids}
            inside = ["--ro-bind", paths[0], "/sys/fs/cgroup"]
        else:
            paths = [os.path.join(self.dirs["memory"], name), os.path.join(self.dirs["pids"], name)]
            settings = {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory, "pids.max": pids}
            inside = ["--ro-bind", paths[0], "/sys/fs/cgroup/memory"]
            if "cpuacct" in self.dirs:  # the run clock counts the run's CPU there (agent/clock.py)
                paths.append(os.path.join(self.dirs["cpuacct"], name))
                inside += ["--ro-bind", paths[-1], "/sys/fs/cgroup/cpuacct"]
        for path in paths:
            _kill_cgroup(path)  # a lease's earlier holder died mid-run: nothing of it may share this one
            os.makedirs(path, exist_ok=True)
        for key, value in settings.items():
            target = next((os.path.join(p, key) for p in paths if os.path.exists(os.path.join(p, key))), None)
            if target is None and key != "memory.memsw.limit_in_bytes":  # v1 without swap accounting lacks memsw
                raise OSError(f"cgroup file {key} missing under {paths}")
            if target is not None:
                with open(target, "w") as f:
                    f.write(str(value))
        try:
            yield [os.path.join(p, "cgroup.procs") for p in paths], inside
        finally:
            for path in paths:
                _kill_cgroup(path)
                try:
                    os.rmdir(path)
                except OSError:
                    pass  # still emptying: the next run of this lease reuses it


def _kill_cgroup(path: str) -> None:
    for _ in range(50):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(line) for line in f if line.strip()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        time.sleep(0.01)


class LocalSandbox:
    """`run(program, stdin, limits)` under bubblewrap + rlimits (+ a cgroup as root); `workers` bounds concurrent
    runs; `leases`: where the runs' uids come from (default: the machine-wide UidLeases)."""

    def __init__(self, limits: Limits | None = None, workers: int | None = None, python: str | None = None,
                 leases: UidLeases | None = None):
        self.bwrap = shutil.which("bwrap", path="/usr/local/bin:/usr/bin:/bin")
        if self.bwrap is None:
            raise RuntimeError("the local sandbox needs bubblewrap: `apt-get install bubblewrap` (`make docker` does)")
        self.limits = limits or Limits()
        self.python = python or (shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
        self.root = os.geteuid() == 0
        self.separate_users = self.root  # program, checker and supervisor under three users
        self.cgroup = RunCgroup() if self.root else None
        if self.cgroup is not None and not self.cgroup.available():
            self.cgroup = None
        self.fs_problem = ""  # what the last run's supervisor could not make private ("" = all of it)
        self._slots = threading.BoundedSemaphore(workers or os.cpu_count() or 2)
        self.leases = leases or UidLeases()

    def command(self, limits: Limits, uids: tuple[int, int] | None = None, inside: list[str] = ()) -> list[str]:
        """The bwrap command line of one run; `uids` (program, checker) as root, from a lease; `inside`: more
        bwrap arguments (the run's cgroup)."""
        config = {
            "workdir": "/tmp/sandbox", "mount_tmpfs": True, "tmpfs_bytes": int(limits.tmpfs_bytes),
            "one_job": True, "python": self.python, "sysctls": ipc_sysctls(limits),
            "fresh_namespaces": True,  # pid, IPC and tmpfs counters start afresh each run (agent/counters.py)
            "uids": {"program": uids[0], "checker": uids[1]} if uids else None,
            "clear_keyrings": uids is not None,  # the leased uid's keyrings outlive runs: emptied before and after
        }
        # Not --unshare-all: as root, a user namespace would leave the leased uids unmapped. The supervisor keeps
        # root's capabilities (bwrap keeps them for a root caller; in a user namespace --cap-add ALL) and drops
        # them for the program (agent/supervisor.py). The root is a fresh tmpfs holding only what is bound below.
        namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.root:
            namespaces += ["--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL"]
        return [self.bwrap, *namespaces, "--die-with-parent", "--new-session", *self._filesystem(), *inside,
                "--", self.python, "-I", "-S", "-c", agent_source(), json.dumps(config)]

    def _filesystem(self) -> list[str]:
        """/usr and the merged-/usr links, a few files of /etc, the interpreter's prefix if outside /usr, a
        fresh /proc and minimal /dev, and empty mount points for the supervisor's size-capped tmpfs places."""
        binds = ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                binds += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                binds += ["--ro-bind", top, top]
        # /etc itself searchable by the program's uid (bwrap would make it root's 0700): shared libraries resolve
        # through /etc/alternatives (numpy's libblas.so.3)
        binds += ["--perms", "0755", "--dir", "/etc"]
        for name in ("ld.so.cache", "localtime", "alternatives", "passwd", "group", "nsswitch.conf"):
            binds += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(self.python)))
        if not (prefix + "/").startswith("/usr/"):
            binds += ["--ro-bind", prefix, prefix]
        binds += ["--proc", "/proc", "--dev", "/dev"]
        for place in ("/tmp", "/var/tmp", "/run/lock", "/dev/mqueue"):
            binds += ["--dir", place]
        return binds

    def run(self, program: str, stdin: str = "", limits: Limits | None = None,
            checker: Checker | None = None) -> Execution:
        limits = limits or self.limits
        job = {"job_id": "local", "program": program, "stdin": stdin,
               "limits": {**limits.to_json(), "nproc": limits.pids if self.root else 0}}
        if checker is not None:
            job["checker"] = {"program": checker.program, "input": checker.input}
        with self._slots, (self.leases.lease() if self.root else _no_lease()) as uids, \
                (self.cgroup.for_run(f"run-{uids[0]}", limits) if self.cgroup else _no_lease()) as cgroup:
            start = time.monotonic()
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
            argv = self.command(limits, uids, cgroup[1] if cgroup else [])
            if cgroup:  # the shell joins the run's cgroup, then becomes bwrap: nothing of the run starts outside
                argv = ["/bin/sh", "-c", 'for f in $1; do echo $$ > "$f" || exit 125; done; shift; exec "$@"', "sh",
                        " ".join(cgroup[0]), *argv]
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env, start_new_session=True, **({"extra_groups": []} if self.root else {}))
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
