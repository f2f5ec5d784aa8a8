"""The supervisor that runs inside a sandbox: reads jobs, runs each program under limits, reports.

Standard library only and no rlvr imports: the Docker backend starts it as `python3 -I -c SOURCE
CONFIG` inside the container, the local backend as a file inside fresh namespaces. One JSON line
in (program, stdin, limits) -> one JSON line out (stdout, stderr, exit code, status, wall and CPU
seconds, peak memory), until stdin closes.

Per job: the program is written to the workdir, run as `python3 -I -B main.py` in a new session
with rlimits (CPU, address space, file size, open files, processes where asked) and an
oom_score_adj of 1000 so the kernel's OOM killer picks it before the supervisor. The wall clock is
watched here; output beyond the cap kills the job. Afterwards every other process this
supervisor can signal is killed (`kill(-1, SIGKILL)`: the whole PID namespace, so a daemonised
child cannot outlive its run) and the workdir and /tmp are wiped. `dirty` in the reply tells the
host to replace the sandbox (a limit was hit, a process survived, or the wipe failed).
"""

import errno
import json
import os
import resource
import select
import signal
import sys
import time

READ_CHUNK = 65536
PYTHON = "/usr/bin/python3"


def main() -> None:
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    if config.get("mount_tmpfs"):  # local backend: private, size-capped dirs in our own mount namespace
        _mount_private_dirs(config)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # a job signalling PID 1 (forwarded to us by init) is ignored
    reader = _LineReader(0)
    if config.get("watch_host"):
        config["host_reader"] = reader
    while True:
        line = reader.readline()
        if line is None:
            return
        try:
            result = run_job(json.loads(line), config)
        except Exception as error:  # a supervisor bug is reported, never a silent hang
            result = {"status": "error", "stdout": "", "stderr": f"sandbox supervisor: {error!r}", "exit_code": None,
                      "wall_s": 0.0, "cpu_s": 0.0, "peak_memory_bytes": 0, "dirty": True}
        _write_all(1, (json.dumps(result) + "\n").encode())
        if config.get("one_job"):
            return


def run_job(job: dict, config: dict) -> dict:
    limits = job["limits"]
    workdir = config.get("workdir", "/sandbox")
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    with open(os.path.join(workdir, "main.py"), "w", encoding="utf-8") as f:
        f.write(job["program"])
    if config.get("drop_to_uid") is not None:
        os.chown(workdir, config["drop_to_uid"], config["drop_to_uid"])
    oom_before = _oom_kills()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    stdin = job.get("stdin", "").encode("utf-8")
    start = time.monotonic()
    python = config.get("python", PYTHON)
    pid, stdin_fd, out_fd, err_fd = _spawn([python, "-I", "-B", "main.py"], env, workdir, limits,
                                           config.get("drop_to_uid"))
    status, outputs, exit_info, strays = _supervise(pid, stdin, stdin_fd, out_fd, err_fd, limits, start,
                                                    config.get("host_reader"))
    wall = time.monotonic() - start
    code, rusage = exit_info
    stdout = outputs[out_fd].decode("utf-8", "replace")
    stderr = outputs[err_fd].decode("utf-8", "replace")
    cpu = rusage.ru_utime + rusage.ru_stime if rusage else 0.0
    if status == "exited":
        if code is not None and code < 0 and -code in (signal.SIGXCPU,):
            status = "timeout"
        elif code == -signal.SIGKILL and _oom_kills() > oom_before:
            status = "memory_limit"
        elif _last_line(stderr).startswith("MemoryError"):
            status = "memory_limit"
        elif code == -signal.SIGXFSZ or _is_file_limit_error(_last_line(stderr)):
            status = "output_limit"
    wiped = _wipe(workdir) and _wipe("/tmp")
    return {
        "status": status, "stdout": stdout, "stderr": stderr, "exit_code": code,
        "wall_s": round(wall, 6), "cpu_s": round(cpu, 6),
        "peak_memory_bytes": int(rusage.ru_maxrss * 1024) if rusage else 0,
        "stray_processes": strays,
        "dirty": status != "exited" or strays > 0 or not wiped,
    }


def _spawn(argv, env, cwd, limits, uid):
    r0, w0 = os.pipe()
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        try:
            os.setsid()
            os.dup2(r0, 0)
            os.dup2(w1, 1)
            os.dup2(w2, 2)
            os.closerange(3, 65536)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(sig, signal.SIG_DFL)
            try:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")
            except OSError:
                pass
            _set_rlimits(limits)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        except BaseException as error:  # noqa: BLE001 - the child must never fall back into the supervisor
            try:
                os.write(2, f"sandbox: could not start the program: {error!r}\n".encode())
            finally:
                os._exit(127)
    for fd in (r0, w1, w2):
        os.close(fd)
    return pid, w0, r1, r2


def _set_rlimits(limits: dict) -> None:
    cpu = max(1, int(limits["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]), int(limits["file_bytes"])))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["nproc"]), int(limits["nproc"])))


def _supervise(pid, stdin, stdin_fd, out_fd, err_fd, limits, start, host_reader=None):
    """Feed stdin, collect capped output, enforce the wall clock.

    Returns (status, outputs by fd, (exit code, rusage), processes still alive after the program exited).
    """
    cap = int(limits["output_bytes"])
    deadline = start + float(limits["wall_s"])
    outputs = {out_fd: bytearray(), err_fd: bytearray()}
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in (out_fd, err_fd):
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    if host_reader is not None:  # the host hanging up means nobody wants this result: stop at once
        poller.register(host_reader.fd, select.POLLIN)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(stdin_fd, False)
        poller.register(stdin_fd, select.POLLOUT)
    else:
        os.close(stdin_fd)
        stdin_fd = None
    status, exited = "exited", False
    open_fds = {out_fd, err_fd}
    while open_fds and not exited:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            status = "timeout"
            break
        for fd, _event in poller.poll(remaining * 1000):
            if fd == pidfd:
                exited = True
            elif host_reader is not None and fd == host_reader.fd:
                if not host_reader.fill():
                    _kill_group(pid)
                    _kill_everything_else()
                    os._exit(0)
            elif fd == stdin_fd:
                try:
                    pending = pending[os.write(stdin_fd, pending[:READ_CHUNK]):]
                except OSError:  # the program closed its stdin; what is left is dropped
                    pending = pending[:0]
                if not pending:
                    poller.unregister(stdin_fd)
                    os.close(stdin_fd)
                    stdin_fd = None
            elif not _drain(fd, outputs, open_fds, poller, cap, once=True):
                status = "output_limit"
        if status == "output_limit":
            break
    if not exited and status == "exited":  # both pipes closed; wait for the exit itself
        if not select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            status = "timeout"
    if status != "exited":
        _kill_group(pid)
    exit_info = _reap(pid)
    strays = _kill_everything_else()  # also closes every writer, so the pipes reach EOF
    for fd in list(open_fds):
        if not _drain(fd, outputs, open_fds, poller, cap, once=False) and status == "exited":
            status = "output_limit"
    for fd in (out_fd, err_fd, pidfd) + ((stdin_fd,) if stdin_fd is not None else ()):
        try:
            os.close(fd)
        except OSError:
            pass
    return status, outputs, exit_info, strays


def _drain(fd, outputs, open_fds, poller, cap, once):
    """Read what `fd` has (once) or all of it up to EOF; False when the output cap was exceeded."""
    os.set_blocking(fd, not once)
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError as error:
            if error.errno != errno.EINTR:
                chunk = b""
            else:
                continue
        if not chunk:
            open_fds.discard(fd)
            try:
                poller.unregister(fd)
            except KeyError:
                pass
            return True
        room = cap - len(outputs[fd])
        outputs[fd] += chunk[:max(room, 0)]
        if len(chunk) > room:
            return False
        if once:
            return True


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


def _wipe(path: str) -> bool:
    """Empty `path` (a tmpfs); True when nothing is left."""
    ok = True
    for root, dirs, files in os.walk(path, topdown=False, onerror=lambda e: None):
        for name in files + dirs:
            full = os.path.join(root, name)
            try:
                if os.path.isdir(full) and not os.path.islink(full):
                    os.rmdir(full)
                else:
                    os.unlink(full)
            except OSError:
                ok = False
    if not ok:  # a job may have removed permissions on its own directories; restore and retry once
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                try:
                    os.chmod(os.path.join(root, name), 0o700)
                except OSError:
                    pass
        ok = True
        for root, dirs, files in os.walk(path, topdown=False):
            for name in files + dirs:
                full = os.path.join(root, name)
                try:
                    os.rmdir(full) if os.path.isdir(full) and not os.path.islink(full) else os.unlink(full)
                except OSError:
                    ok = False
    return ok


def _oom_kills() -> int:
    """The memory cgroup's OOM-kill count (cgroup v1 or v2), 0 when unreadable."""
    for path, key in (("/sys/fs/cgroup/memory.events", "oom_kill"), ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except OSError:
            continue
    return 0


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _is_file_limit_error(line: str) -> bool:
    return line.startswith("OSError") and ("[Errno 27]" in line or "[Errno 28]" in line)


def _mount_private_dirs(config: dict) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE: nothing propagates out
    size = str(config.get("tmpfs_bytes", 64 << 20)).encode()
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0x2 | 0x4, b"size=" + size + b",mode=1777") != 0:  # nosuid, nodev
        raise OSError(ctypes.get_errno(), "mount tmpfs on /tmp")


class _LineReader:
    def __init__(self, fd: int):
        self.fd, self.buffer = fd, bytearray()

    def readline(self):
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[:end + 1]
                return line
            if not self.fill():
                return None

    def fill(self) -> bool:
        """Read what is available into the buffer; False at end of stream."""
        chunk = os.read(self.fd, 1 << 20)
        self.buffer += chunk
        return bool(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    main()
