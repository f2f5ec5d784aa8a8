"""Per-run state reset for the sandbox supervisor (supervisor.py): what one run leaves, the next must not see.

Standard library only, no rlvr imports, no `from __future__`: base.agent_source() sends this file's source
into the sandbox first, followed by counters.py's, clock.py's, process.py's and supervisor.py's. After every run the
workdir root, /tmp and /dev/shm are emptied and POSIX message queues unlinked; SysV IPC objects
(which the supervisor, without CAP_SYS_ADMIN, may not remove), shared memory charged to the
sandbox's memory cgroup above the level at start, any tree the bounded wipe could not remove, and
any change to those places' own root inodes are reported, and the host replaces the sandbox.
Nothing here raises: a hostile tree makes the sandbox dirty, never the run an error.

The roots themselves. Emptying a directory keeps its inode, and with it whatever its owner set on
it: its mode, a default ACL (inherited by every file written into it later), extended attributes
(an answer cache one run leaves and the next reads, or hundreds of MiB of kernel memory that the
shared-memory check does not see). So no root belongs to the program: the workdir root is root's,
mode 0711 (_prepare_roots), and each run gets a fresh directory below it (RUN_DIR, _make_run_dir),
removed with its files; /tmp and /dev/shm are root's and sticky, where only an owner may set a
user attribute. After each run every root is compared with its state at start (owner, mode,
attribute names), and any difference makes the sandbox dirty.
"""

import errno
import os
import platform

STATE_DIRS = ("/tmp", "/dev/shm")  # emptied after every run, besides the workdir
RUN_DIR = "run"  # the program's working directory under the workdir root, made afresh for every run
WIPE_MAX_DEPTH, WIPE_MAX_ENTRIES = 64, 20000  # beyond either the wipe gives up: dirty, sandbox replaced
SHMEM_SLACK = 1 << 20  # shared memory (tmpfs, SysV, POSIX shm) allowed above the level at start
KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())  # keyctl(2)'s syscall number


def _reset_state(workdir: str, baseline_shmem: int, keyring_uid: int | None = None,
                 baseline_roots: dict | None = None) -> list[str]:
    """Empty the run's writable places; what could not be reset, as short descriptions (never raises).

    `keyring_uid`: also clear that user's kernel keyrings (local backend as root, where the
    program's user is a host uid leased per run, whose keyrings outlive the run; Docker's seccomp
    profile refuses the keyring calls, and a user namespace has keyrings of its own).
    `baseline_roots`: the places' root inodes at start (_prepare_roots), which must be unchanged."""
    problems = []
    if keyring_uid is not None and not _clear_keyrings(keyring_uid):
        problems.append(f"could not clear the kernel keyrings of uid {keyring_uid}")
    for path in (workdir, *STATE_DIRS):
        if os.path.isdir(path) and not _wipe(path):
            problems.append(f"could not empty {path}")
    try:
        for name in os.listdir("/dev/mqueue"):
            try:
                os.unlink(os.path.join("/dev/mqueue", name))
            except OSError:
                problems.append(f"message queue {name}")
    except OSError:
        pass
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                if len(f.read().strip().splitlines()) > 1:
                    problems.append(f"SysV {kind} objects")
        except OSError:
            pass
    shmem = _shmem_bytes()
    if shmem > baseline_shmem + SHMEM_SLACK:
        problems.append(f"shared memory {shmem} bytes above {baseline_shmem} at start")
    return problems + _changed_roots(baseline_roots or {})


def _changed_roots(baseline: dict) -> list[str]:
    """The places whose own root inode differs from `baseline` (path -> _root_state at start)."""
    return [f"{path} itself changed: {state} at start, {_root_state(path)} now"
            for path, state in baseline.items() if _root_state(path) != state]


def _prepare_roots(workdir: str) -> dict:
    """Make the workdir root root's own, mode 0711 (the program may pass through it, not change it), and
    return the state of every place's root inode to compare with after each run."""
    os.makedirs(workdir, exist_ok=True)
    os.chown(workdir, 0, 0)
    os.chmod(workdir, 0o711)
    return {path: _root_state(path) for path in (workdir, *STATE_DIRS) if os.path.isdir(path)}


def _make_run_dir(root: str, uid, program: str) -> str:
    """A fresh directory under the workdir root holding main.py, owned by the program's user: its working
    directory for this run only. The root stays root's, so its mode, ACLs and extended attributes are not the
    program's to change; the run directory, whatever was done to it, is removed with the run's files."""
    path = os.path.join(root, RUN_DIR)
    os.mkdir(path, 0o700)  # an old one left means the last reset failed: the job errs and the sandbox is replaced
    with open(os.path.join(path, "main.py"), "w", encoding="utf-8") as f:
        f.write(program)
    if uid is not None:
        os.chown(os.path.join(path, "main.py"), uid, uid)
        os.chown(path, uid, uid)
    return path


def _root_state(path: str):
    """(mode, owner, group, attribute names) of the directory `path` itself; None when unreadable."""
    try:
        st = os.lstat(path)
        return st.st_mode, st.st_uid, st.st_gid, tuple(sorted(os.listxattr(path, follow_symlinks=False)))
    except OSError:
        return None


def _wipe(path: str) -> bool:
    """Empty the directory `path`, without following links; False (never an exception) when anything
    is left: deeper than WIPE_MAX_DEPTH, more than WIPE_MAX_ENTRIES entries, or an error."""
    stack = []
    try:
        stack.append((os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW), None))
        budget = WIPE_MAX_ENTRIES
        while stack:
            fd, _name = stack[-1]
            child = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        child = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if child is not None:
                if len(stack) >= WIPE_MAX_DEPTH:
                    return False
                try:
                    sub = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except PermissionError:  # a run may remove its own permissions (matters without DAC_OVERRIDE)
                    os.chmod(child, 0o700, dir_fd=fd)
                    sub = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                stack.append((sub, child))
                continue
            os.close(fd)
            stack.pop()
            if stack:
                os.rmdir(_name, dir_fd=stack[-1][0])
        return True
    except BaseException:  # noqa: BLE001 - a hostile tree must make the sandbox dirty, never crash the supervisor
        return False
    finally:
        for fd, _name in stack:
            try:
                os.close(fd)
            except OSError:
                pass


def _clear_keyrings(uid: int) -> bool:
    """KEYCTL_CLEAR the persistent, user and user-session keyrings of `uid`, from a child running as that user.

    The persistent keyring (KEYCTL_GET_PERSISTENT) outlives every process of its uid, and so every run and
    every rlvr process, until it has gone unused for days: a run could leave a key there for the next run of
    that uid to read. Getting it links it into this child's process keyring, which the child possesses, and
    only a possessor may clear it (the user keyring is no such link once a clear of the user-session keyring
    has cut it off). A kernel without persistent keyrings (EOPNOTSUPP) has none to clear."""
    if KEYCTL is None:
        return False
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                persistent = libc.syscall(KEYCTL, 22, -1, -2)  # KEYCTL_GET_PERSISTENT into KEY_SPEC_PROCESS_KEYRING
                if persistent >= 0:
                    cleared = [libc.syscall(KEYCTL, 7, persistent)]  # KEYCTL_CLEAR
                else:
                    cleared = [0 if ctypes.get_errno() == errno.EOPNOTSUPP else -1]
                cleared += [libc.syscall(KEYCTL, 7, ring) for ring in (-4, -5)]  # KEY_SPEC_USER(_SESSION)_KEYRING
                code = 0 if all(r == 0 for r in cleared) else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    except BaseException:  # noqa: BLE001 - never raises: the run is reported dirty instead
        return False


def _shmem_bytes() -> int:
    """Shared memory (tmpfs, SysV, POSIX shm) charged to our memory cgroup (v2 or v1), 0 when unreadable."""
    return _cgroup_count((("/sys/fs/cgroup/memory.stat", "shmem"), ("/sys/fs/cgroup/memory/memory.stat", "total_shmem")))


def _cgroup_count(places) -> int:
    """The first readable count among (cgroup file, key) places (a "key value" line, cgroup v2 then v1), 0 when
    none is readable: the one reader of the memory cgroup's flat-keyed files (supervisor.py's OOM-kill count too)."""
    for path, key in places:
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0
