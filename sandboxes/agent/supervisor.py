"""The supervisor that runs inside a sandbox: reads jobs, runs each program under limits, reports.

Standard library only and no rlvr imports: both backends start it as `python3 -I -S -c SOURCE
CONFIG` (SOURCE = base.agent_source(): reset.py, counters.py, clock.py, process.py, then this file),
Docker inside the container, the local backend inside fresh namespaces. One JSON line
in (job id, program, stdin, limits, optional checker) -> one JSON line out (the same job id,
stdout, stderr, exit code, status, wall and CPU seconds, peak memory, the checker's verdict),
until stdin closes.

Who can touch whom. The supervisor runs as root (Docker: with only the CHOWN, DAC_OVERRIDE,
FOWNER, KILL, SETUID and SETGID capabilities) and marks itself non-dumpable, so no program can
ptrace it, open its /proc/<pid>/fd or mem, or signal it. The program runs as `uids.program`
(Docker: 65534; local: a uid leased for the run); a checker, when the job has one, runs as `uids.checker`
(65533; local: the lease's other uid), another user, so the
program cannot reach the checker's memory, files descriptors or signals either. The checker and
the program talk only over two pipes (checker fd 4 -> program fd 3, program fd 4 -> checker fd 3);
the checker writes its verdict to its fd 5, which the program never has, and the supervisor
returns what arrived there as `verdict`. The checker's input (the tests) arrives on its stdin.

Per job: the program is written to a fresh run directory (reset.RUN_DIR) under the workdir root, which
belongs to root (reset.py: the program owns no inode that outlives its run), and run there
as `python3 -I -B main.py` in a new session with rlimits (CPU, address space, file size, open
files, processes where asked) and an oom_score_adj of 1000. Its time limits are the run clock's
(clock.py: CPU time, and wall time not spent waiting for a CPU, with a backstop); output
beyond the cap kills the job. With a checker, the job ends when the checker exits. Afterwards every
other process is killed (`kill(-1, SIGKILL)` over the PID namespace) and per-run state is reset
(reset.py: the workdir root, /tmp and /dev/shm emptied and their own inodes checked, POSIX
message queues removed); SysV IPC objects left behind, shared memory above the level at start, a
tree the bounded wipe cannot remove, a changed root inode, or a surviving process set `dirty` in
the reply, which tells the host to replace the sandbox. Clean-up never raises.
"""

import ctypes
import json
import os
import signal
import sys
import time

PYTHON = "/usr/bin/python3"
CHECKER_MEMORY = 256 << 20  # address space of the checker process (trusted test code + decoding)
CHECKER_OUTPUT = 64 << 10  # the checker's own stdout/stderr, kept for diagnosis

try:  # imported on the host (tests); inside a sandbox their sources come first (base.agent_source)
    from rlvr.sandboxes.agent.clock import RunClock
    from rlvr.sandboxes.agent.counters import _after_run, _before_run
    from rlvr.sandboxes.agent.process import (_LIBC, _drain, _has_exited, _kill_everything_else, _kill_group, _reap,
                                              _spawn, _supervise)
    from rlvr.sandboxes.agent.reset import (_cgroup_count, _clear_keyrings, _make_run_dir, _prepare_roots,
                                            _reset_state, _shmem_bytes)
except ImportError:
    pass


def main() -> None:
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    _make_undumpable()
    problems = _set_sysctls(config.get("sysctls") or {})  # local backend: this run's IPC namespace bounded
    if config.get("mount_tmpfs"):  # local backend: private, size-capped dirs in our own mount namespace
        problems.append(_mount_private_dirs(config))
    config["fs_problem"] = "; ".join(p for p in problems if p)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    config["baseline_shmem"] = _shmem_bytes()
    config["baseline_roots"] = _prepare_roots(config.setdefault("workdir", "/sandbox"))
    reader = _LineReader(0)
    if config.get("watch_host"):
        config["host_reader"] = reader
    while True:
        line = reader.readline()
        if line is None:
            return
        job_id = None
        try:
            job = json.loads(line)
            job_id = job.get("job_id")
            result = run_job(job, config)
        except Exception as error:  # a supervisor bug is reported, never a silent hang
            result = {"status": "error", "stdout": "", "stderr": f"sandbox supervisor: {error!r}", "exit_code": None,
                      "wall_s": 0.0, "cpu_s": 0.0, "peak_memory_bytes": 0, "dirty": True}
        result["job_id"] = job_id
        if config.get("fs_problem"):
            result["fs_problem"] = config["fs_problem"]
        _write_all(1, (json.dumps(result) + "\n").encode())
        if config.get("one_job"):
            return


def run_job(job: dict, config: dict) -> dict:
    limits = job["limits"]
    uids = config.get("uids") or {}
    program_uid, checker_uid = uids.get("program"), uids.get("checker")
    keyring_uid = program_uid if config.get("clear_keyrings") else None
    if keyring_uid is not None and not _clear_keyrings(keyring_uid):  # before too: a run killed mid-way never reset
        raise OSError(f"could not clear the kernel keyrings of uid {keyring_uid}")
    counters = _before_run(config)  # counters a program can read, scrambled (counters.py)
    workdir = _make_run_dir(config["workdir"], program_uid, job["program"])
    oom_before = _oom_kills()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    python = config.get("python", PYTHON)
    checker = job.get("checker")
    prog_in, prog_out, prog_err = os.pipe(), os.pipe(), os.pipe()
    prog_fds = {0: prog_in[0], 1: prog_out[1], 2: prog_err[1]}
    feeds = [(prog_in[1], job.get("stdin", "").encode("utf-8"))]
    captures = {prog_out[0]: int(limits["output_bytes"]), prog_err[0]: int(limits["output_bytes"])}
    limited = set(captures)
    child_ends = [prog_in[0], prog_out[1], prog_err[1]]
    checker_pid = None
    if checker:  # started first, so no program (a fork bomb, say) can leave it without a process slot
        links = (os.pipe(), os.pipe())  # checker -> program, program -> checker
        prog_fds.update({3: links[0][0], 4: links[1][1]})
        chk_in, chk_out, chk_err, verdict = os.pipe(), os.pipe(), os.pipe(), os.pipe()
        checker_limits = {**limits, "memory_bytes": max(CHECKER_MEMORY, int(limits["memory_bytes"])), "nproc": 0}
        checker_pid = _spawn(None, env, "/", checker_limits, checker_uid,
                             {0: chk_in[0], 1: chk_out[1], 2: chk_err[1], 3: links[1][0], 4: links[0][1],
                              5: verdict[1]}, inline=checker["program"])
        child_ends += [chk_in[0], chk_out[1], chk_err[1], verdict[1], *links[0], *links[1]]
        feeds.append((chk_in[1], checker.get("input", "").encode("utf-8")))
        captures.update({chk_out[0]: CHECKER_OUTPUT, chk_err[0]: CHECKER_OUTPUT, verdict[0]: int(limits["output_bytes"])})
        limited.add(verdict[0])
    start = time.monotonic()  # the program's clock starts with the program (clock.py)
    clock = RunClock(limits, start, not_program=(checker_pid,) if checker_pid is not None else ())
    pid = _spawn([python, "-I", "-B", "main.py"], env, workdir, limits, program_uid, prog_fds)
    for fd in child_ends:
        os.close(fd)
    main_pid = checker_pid if checker_pid is not None else pid
    status, outputs = _supervise(main_pid, feeds, captures, limited, clock, config.get("host_reader"))
    program_done = main_pid == pid or _has_exited(pid)
    if status != "exited":
        _kill_group(main_pid)
    main_info = _reap(main_pid)
    if checker_pid is not None:
        if not program_done:  # still serving calls when the tests ended: we stop it, no verdict from that
            _kill_group(pid)
        exit_info = _reap(pid) if program_done else (None, _reap(pid)[1])
    else:
        exit_info = main_info
    strays = _kill_everything_else()  # also closes every writer, so the pipes reach EOF
    for fd in list(captures):
        if not _drain(fd, outputs, captures[fd]) and fd in limited and status == "exited":
            status = "output_limit"
        os.close(fd)
    wall = time.monotonic() - start
    code, rusage = exit_info
    stdout = outputs[prog_out[0]].decode("utf-8", "replace")
    stderr = outputs[prog_err[0]].decode("utf-8", "replace")
    cpu = max(rusage.ru_utime + rusage.ru_stime if rusage else 0.0, clock.cpu)  # the clock's: orphans too
    if status == "exited" and code is not None:
        if code < 0 and -code in (signal.SIGXCPU,):
            status = "timeout"
        elif code == -signal.SIGKILL and _oom_kills() > oom_before:
            status = "memory_limit"
        elif _last_line(stderr).startswith("MemoryError"):
            status = "memory_limit"
        elif code == -signal.SIGXFSZ or _is_file_limit_error(_last_line(stderr)):
            status = "output_limit"
    leftovers = _reset_state(config["workdir"], config["baseline_shmem"], keyring_uid, config["baseline_roots"])
    leftovers += _after_run(counters)  # a counter moved too far: the container is replaced
    result = {
        "status": status, "stdout": stdout, "stderr": stderr, "exit_code": code,
        "wall_s": round(wall, 6), "cpu_s": round(cpu, 6),
        "peak_memory_bytes": int(rusage.ru_maxrss * 1024) if rusage else 0,
        "stray_processes": strays, "leftover_state": leftovers,
        "dirty": status != "exited" or strays > 0 or bool(leftovers),
    }
    if checker_pid is not None:
        result["verdict"] = outputs[verdict[0]].decode("utf-8", "replace")
        result["checker_exit_code"] = main_info[0]
        result["checker_stderr"] = (outputs[chk_out[0]] + outputs[chk_err[0]]).decode("utf-8", "replace")[-2000:]
    return result


def _oom_kills() -> int:
    """The memory cgroup's OOM-kill count (cgroup v1 or v2), 0 when unreadable."""
    return _cgroup_count((("/sys/fs/cgroup/memory.events", "oom_kill"),
                          ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")))


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _is_file_limit_error(line: str) -> bool:
    return line.startswith("OSError") and ("[Errno 27]" in line or "[Errno 28]" in line)


def _make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: no ptrace attach, no /proc/<pid>/mem or fd by anyone without CAP_SYS_PTRACE."""
    if _LIBC.prctl(4, 0, 0, 0, 0) != 0:
        raise OSError("PR_SET_DUMPABLE failed")


def _set_sysctls(sysctls: dict) -> list:
    """Write namespaced sysctls (the IPC namespace's SysV limits, base.ipc_sysctls); what failed, as text."""
    problems = []
    for name, value in sysctls.items():
        try:
            with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
                f.write(str(value))
        except OSError as error:
            problems.append(f"{name} not set ({error.strerror}): SysV IPC unbounded but for the run's cgroup")
    return problems


def _mount_private_dirs(config: dict) -> str:
    """Local backend: the host's filesystem read-only, a private size-capped tmpfs on every place the
    program could otherwise write (/tmp, /var/tmp, /dev/shm, /run/lock, /run/shm) and a fresh
    mqueue view. Returns "" when all of that held, else what did not (doctor prints it)."""
    libc = _LIBC
    libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE: nothing propagates out
    size = str(config.get("tmpfs_bytes", 64 << 20)).encode()
    problems = []
    # mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, {attr_set: MOUNT_ATTR_RDONLY}) (Linux 5.12+; syscall
    # 442 on every architecture): every mount we inherited becomes read-only in this namespace.
    attr = (ctypes.c_uint64 * 4)(1, 0, 0, 0)
    if libc.syscall(442, -100, b"/", 0x8000, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        problems.append(f"host filesystem stays writable (mount_setattr: {os.strerror(ctypes.get_errno())})")
    for path in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run/shm"):
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        if libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0x2 | 0x4, b"size=" + size + b",mode=1777") != 0:  # nosuid, nodev
            if path == "/tmp":
                raise OSError(ctypes.get_errno(), "mount tmpfs on /tmp")
            problems.append(f"{path} is the host's (tmpfs: {os.strerror(ctypes.get_errno())})")
    if os.path.isdir("/dev/mqueue") and libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue", 0x2 | 0x4 | 0x8, None) != 0:
        problems.append("/dev/mqueue shows the host's queues")
    if libc.syscall(442, -100, b"/proc", 0, ctypes.byref((ctypes.c_uint64 * 4)(0, 1, 0, 0)), 32) != 0:
        pass  # /proc read-only only costs the program its oom_score_adj write
    return "; ".join(problems)


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
