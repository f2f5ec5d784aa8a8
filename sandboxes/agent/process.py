"""How the sandbox supervisor (supervisor.py) runs a process and ends it: fork and exec under limits, as another
user, with only the descriptors it is given (`_spawn`); feed its stdin and collect its capped output until it
exits or its run clock (clock.py) runs out (`_supervise`); then kill and reap it and everything else in
the PID namespace (`_kill_everything_else`).

Standard library only, no rlvr imports, no `from __future__`: base.agent_source() sends this file's source into
the sandbox between clock.py's and supervisor.py's.
"""

import ctypes
import errno
import fcntl
import os
import resource
import select
import signal
import sys
import time

READ_CHUNK = 65536
_LIBC = ctypes.CDLL(None, use_errno=True)


def _spawn(argv, env, cwd, limits, uid, fds: dict, inline: str | None = None):
    """Fork and exec `argv` with `fds` (target fd -> our fd) as its only open descriptors.

    `inline`: instead of exec, run this trusted source in the forked interpreter (a checker: it
    saves a Python start per job). The child drops to `uid` before any of it runs and stays
    non-dumpable; what it inherits of our memory is ours, never a program's."""
    compiled = _compiled(inline) if inline is not None else None
    pid = os.fork()
    if pid == 0:  # child: never returns
        try:
            os.setsid()
            high = {target: fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for target, fd in fds.items()}
            for target, fd in high.items():
                os.dup2(fd, target)
            os.closerange(max(fds) + 1, 65536)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(sig, signal.SIG_DFL)
            try:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")
            except OSError:
                pass
            _set_rlimits(limits)
            if _LIBC.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: no setuid binary of the host raises it
                raise OSError("PR_SET_NO_NEW_PRIVS failed")
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            else:  # local backend, not root: we are root of a user namespace; the program must not be
                _drop_capabilities()
            os.chdir(cwd)
            if inline is not None:
                _run_inline(inline, compiled)
            os.execve(argv[0], argv, env)
        except BaseException as error:  # noqa: BLE001 - the child must never fall back into the supervisor
            try:
                os.write(2, f"sandbox: could not start the program: {error!r}\n".encode())
            finally:
                os._exit(127)
    return pid


_INLINE = {}  # the last inline source -> its code: a warm supervisor compiles the checker once, not per job


def _compiled(source: str):
    """`source` compiled (cached for the next job), or None if it does not compile: the child then reports it."""
    if source not in _INLINE:
        _INLINE.clear()
        try:
            _INLINE[source] = compile(source, "checker.py", "exec")
        except BaseException:  # noqa: BLE001 - compiled again in the child, which reports the error
            return None
    return _INLINE[source]


def _run_inline(source: str, code_object=None) -> None:
    """Run `source` (or its `code_object`) as __main__ in this (forked) interpreter and exit with its status;
    never returns."""
    code = 0
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as in a fresh interpreter: EPIPE raises, it does not kill
    try:
        code_object = code_object or compile(source, "checker.py", "exec")
        exec(code_object, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102 - trusted, from the host
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException as error:  # noqa: BLE001 - reported on its stderr, as an interpreter would
        code = 1
        try:
            os.write(2, f"checker: {error!r}\n".encode())
        except OSError:
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001, S110 - a closed stream must not stop the exit
                pass
        os._exit(code)


def _set_rlimits(limits: dict) -> None:
    # a backstop one second past the run clock's CPU limit (clock.py), which ends the run as a timeout: were
    # the kernel's SIGXCPU first (its accounting runs ahead of /proc's), the checker could see its candidate's
    # pipes close before the candidate is a zombie, and the run read as an early exit (seen under load)
    cpu = max(1, int(limits["cpu_s"] + 0.999)) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]), int(limits["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # no POSIX message queue memory to squat
    if limits.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["nproc"]), int(limits["nproc"])))


def _supervise(main_pid, feeds, captures, limited, clock, host_reader=None):
    """Feed the input pipes, collect capped output, read the run clock until `main_pid` exits.

    Returns (status, outputs by fd). Each fd in `captures` keeps at most its cap; one in `limited`
    going past it ends the job with output_limit; a limit of the clock (clock.py) with timeout.
    """
    outputs = {fd: bytearray() for fd in captures}
    pidfd = os.pidfd_open(main_pid)
    poller = select.poll()
    open_fds = set(captures)
    for fd in captures:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    if host_reader is not None:  # the host hanging up means nobody wants this result: stop at once
        poller.register(host_reader.fd, select.POLLIN)
    pending = {}
    for fd, data in feeds:
        if data:
            os.set_blocking(fd, False)
            pending[fd] = memoryview(data)
            poller.register(fd, select.POLLOUT)
        else:
            os.close(fd)
    status = "exited"
    try:
        while status == "exited":
            now = time.monotonic()
            if clock.until_tick(now) <= 0:
                if clock.tick(now):
                    status = "timeout"
                continue
            events = poller.poll(clock.until_tick(now) * 1000)
            if any(fd == pidfd for fd, _ in events):
                break
            for fd, _event in events:
                if host_reader is not None and fd == host_reader.fd:
                    if not host_reader.fill():
                        _kill_group(main_pid)
                        _kill_everything_else()
                        os._exit(0)
                elif fd in pending:
                    try:
                        pending[fd] = pending[fd][os.write(fd, pending[fd][:READ_CHUNK]):]
                    except OSError:  # the reader closed its end; what is left is dropped
                        pending[fd] = pending[fd][:0]
                    if not pending[fd]:
                        poller.unregister(fd)
                        os.close(fd)
                        del pending[fd]
                elif fd in open_fds and not _drain(fd, outputs, captures[fd], once=True, open_fds=open_fds,
                                                   poller=poller) and fd in limited:
                    status = "output_limit"
    finally:
        for fd in list(pending) + [pidfd]:
            os.close(fd)
    return status, outputs


def _drain(fd, outputs, cap, once=False, open_fds=None, poller=None):
    """Read what `fd` has (once) or all of it up to EOF; False when its cap was exceeded."""
    os.set_blocking(fd, not once)
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError as error:
            if error.errno == errno.EINTR:
                continue
            chunk = b""
        if not chunk:
            if open_fds is not None:
                open_fds.discard(fd)
                poller.unregister(fd)
            return True
        room = cap - len(outputs[fd])
        outputs[fd] += chunk[:max(room, 0)]
        if len(chunk) > room:
            return False
        if once:
            return True


def _has_exited(pid) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return True
    try:
        return bool(select.select([fd], [], [], 0)[0])
    finally:
        os.close(fd)


def _kill_group(pid):
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def _reap(pid):
    while True:
        try:
            _pid, status, rusage = os.wait4(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return None, None
        if os.WIFSIGNALED(status):
            return -os.WTERMSIG(status), rusage
        return os.WEXITSTATUS(status), rusage


def _other_pids() -> list[int]:
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(name))
    return pids


def _kill_everything_else() -> int:
    """SIGKILL every process in the namespace but init and us; returns how many were alive at first."""
    first = len(_other_pids())
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        _reap_any()
        if not _other_pids():
            break
        time.sleep(0.005)
    return first


def _reap_any():
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _drop_capabilities() -> None:
    """No new privileges, and an empty capability bounding set, so the exec'd program holds no
    capability even as root of a user namespace (it could otherwise undo the read-only mounts)."""
    for cap in range(64):
        _LIBC.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; past the last capability it fails, harmlessly
    if _LIBC.prctl(23, 21, 0, 0, 0) == 1:  # PR_CAPBSET_READ of CAP_SYS_ADMIN
        raise OSError("could not empty the capability bounding set")
