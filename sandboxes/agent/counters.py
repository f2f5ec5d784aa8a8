"""Counters a program can read, scrambled before every run, and a run that moves one too far replaced.

Standard library only, no rlvr imports, no `from __future__`: base.agent_source() sends this file's source into
the sandbox after reset.py's.

Why. Some numbers the kernel hands out are kept from one run to the next, and any program can read them: the
inode numbers of memfds, SysV shared memory and shared anonymous maps (one internal tmpfs for the whole host)
and of pipes and sockets (`get_next_ino`), each handed out per CPU in batches of 1024; a container's pid
counter, its tmpfs places' inode counters and its SysV IPC ids. A run can allocate until the next number has a
chosen remainder and a later run reads it back by allocating one: in the same warm container, a fresh container,
the local backend's fresh namespaces, another rlvr process (measured: an 8-bit value read back exactly in
4 tries of 4 from each of them; tests/sandboxes/test_sandbox_counters.py). Used as an answer cache, an honest sample's answers
are replayed by a later sample that computes nothing. None of these can be reset from inside a container
(a fresh pid namespace or tmpfs needs CAP_SYS_ADMIN; /proc/sys, where ns_last_pid is, is read-only there).

What is done, before every run (`_scramble`), with counts drawn uniformly with os.urandom:
- Per-CPU counters, on every CPU the sandbox may use (pinned there with sched_setaffinity): memfds (the
  shared-memory tmpfs) and pipes (`get_next_ino`) move by [0, BATCH), BATCH = 1024 = the batch, so the next
  number's place in its CPU's batch is exactly uniform whatever the last run left: its remainder modulo any power
  of two up to 1024 is uniform, modulo any other m within m/1024 of it.
- The pid counter (and with it the host's fork count and pidfs inode numbers) by [0, SPREAD) threads created
  and joined in C (pthread_create with getpid as the start routine: no Python in the thread). Docker only,
  where the namespaces live as long as the container: every tmpfs place by [0, SPREAD) O_TMPFILE inodes, and the
  SysV ids of message queues, segments and semaphore sets by [0, SPREAD) objects made and removed, each at the
  first run and after a run that moved it (`_before_run`). The local
  backend runs every program in fresh pid and IPC namespaces on fresh tmpfs mounts, whose counters start from
  the same values each run.

Noise alone only slows a writer: moving a counter by SPREAD per step, it still passes log2(W / SPREAD) bits, W
being what it can move in a run. So, Docker only, `_moved` reads each container counter just before the
program starts and after the run, and a run that moved one by more than SPREAD (or forked often enough to lap
the pid ring, by the host's fork count) makes the container dirty: it is replaced, and a fresh container's
counters start from fixed values. A writer kept within SPREAD chooses a remainder modulo at most SPREAD, which
the next scramble's uniform [0, SPREAD) drowns (exactly for powers of two, and within m/SPREAD of uniform for
any other modulus m). SPREAD is smaller than BATCH because every honest run pays for it and the cap bounds the
writer; an honest run that makes more than SPREAD processes or files costs a container start, no verdict.
Left: the host-wide batch counters' batch count (which batch a CPU draws next), see sandboxes/README.md.
"""

import ctypes
import os

try:  # imported on the host (tests); inside a sandbox reset.py's source comes first (base.agent_source)
    from rlvr.sandboxes.agent.reset import STATE_DIRS
except ImportError:
    pass

BATCH = 1024  # the per-CPU inode batch of the kernel's own tmpfs and of get_next_ino (SHMEM_INO_BATCH, LAST_INO_BATCH)
SPREAD = 256  # the container counters' scramble, and how far a run may move one before its container is replaced
_C = ctypes.CDLL(None, use_errno=True)
_IPC_KINDS = ("msg", "shm", "sem")


def _before_run(config: dict):
    """Scramble the counters; in a warm container, return their values to compare after the run (else None).

    A container counter (a tmpfs place's, a SysV kind's) is scrambled at the first run and then only after a run
    that moved it: one no program moved still holds the last scramble's draw plus the supervisor's own steps,
    which say nothing about any run. Host-wide counters, and the pid counter (which moves the host's fork count
    too), are scrambled before every run: another sandbox's program may have moved them."""
    places = [path for path in (config["workdir"], *STATE_DIRS) if os.path.isdir(path)]
    container = not config.get("fresh_namespaces")  # the local backend's namespaces and tmpfs are the run's own
    _scramble(places, container, config.get("stale_counters"))
    if not container or config.get("one_job"):
        return None
    config["stale_counters"] = set()
    return places, _counters(places), config


def _after_run(before) -> list:
    """What the run moved too far (the container is then replaced); nothing when there was no `before`. Notes in
    the supervisor's config which counters the run moved at all, to scramble before the next run."""
    if before is None:
        return []
    places, values, config = before
    far, config["stale_counters"] = _moved(values, places)
    return far


def _draw(spread: int = SPREAD) -> int:
    return int.from_bytes(os.urandom(2), "little") % spread  # both spreads divide 65536: exactly uniform


def _scramble(places, container: bool, stale=None) -> None:
    """Move every counter a program can read by a fresh random count; raises OSError when one cannot be moved
    (the run is then an error and the sandbox replaced: never a run on an unscrambled counter). `stale`: the
    container counters to move (places and SysV kinds by name), None for all."""
    cpus = os.sched_getaffinity(0)
    here = _C.sched_getcpu()
    try:  # the CPU we are on first, the rest after (one migration fewer), the others' counters on the last
        for cpu in sorted(cpus, key=lambda cpu: cpu != here):
            os.sched_setaffinity(0, {cpu})
            for _ in range(_draw(BATCH)):
                os.close(os.memfd_create("c"))
            for _ in range(_draw(BATCH)):
                for fd in os.pipe():
                    os.close(fd)
        _burn_pids(_draw())  # pinned: each thread starts and ends on this CPU, no waiting for another one
        if container:
            for place in (p for p in places if stale is None or p in stale):
                for _ in range(_draw()):
                    os.close(os.open(place, os.O_TMPFILE | os.O_RDWR, 0o600))
            for kind in (k for k in _IPC_KINDS if stale is None or k in stale):
                for _ in range(_draw()):
                    _ipc_remove(kind, _ipc_make(kind))
    finally:
        os.sched_setaffinity(0, cpus)


def _burn_pids(count: int) -> None:
    start = ctypes.cast(_C.getpid, ctypes.c_void_p)  # a thread running getpid: no Python, nothing to lock
    thread = ctypes.c_ulong()
    for _ in range(count):
        error = _C.pthread_create(ctypes.byref(thread), None, start, None)
        if error:
            raise OSError(error, "pthread_create while scrambling the pid counter")
        _C.pthread_join(thread, None)


def _ipc_make(kind: str) -> int:
    ident = {"msg": lambda: _C.msgget(0, 0o1600), "shm": lambda: _C.shmget(0, 1, 0o1600),
             "sem": lambda: _C.semget(0, 1, 0o1600)}[kind]()  # IPC_PRIVATE, IPC_CREAT | 0600
    if ident < 0:
        raise OSError(ctypes.get_errno(), f"SysV {kind} id while scrambling the IPC counters")
    return ident


def _ipc_remove(kind: str, ident: int) -> None:
    {"msg": lambda: _C.msgctl(ident, 0, None), "shm": lambda: _C.shmctl(ident, 0, None),
     "sem": lambda: _C.semctl(ident, 0, 0)}[kind]()  # IPC_RMID


def _ipc_count(ident: int) -> int:
    """A SysV id as a count: sequence * 32768 + an index that cycles through 64 slots while few objects exist,
    the sequence stepping at each wrap (ipc/util.c)."""
    return (ident >> 15) * 64 + (ident & 32767)


def _counters(places) -> dict:
    """The container counters as they stand (Docker): the next inode of each tmpfs place, the last pid, the
    host's fork count and the next SysV id of each kind. Reading them moves them by one, which SPREAD absorbs."""
    values = {}
    for place in places:
        fd = os.open(place, os.O_TMPFILE | os.O_RDWR, 0o600)
        values[place] = os.fstat(fd).st_ino
        os.close(fd)
    with open("/proc/sys/kernel/ns_last_pid") as f:
        values["pid"] = int(f.read())
    with open("/proc/stat") as f:
        values["forks"] = next(int(line.split()[1]) for line in f if line.startswith("processes "))
    for kind in _IPC_KINDS:
        ident = _ipc_make(kind)
        _ipc_remove(kind, ident)
        values[kind] = _ipc_count(ident)
    return values


def _moved(before: dict, places):
    """(the counters the run moved by more than SPREAD since `before`, as short descriptions; the names of those it
    moved at all, None when unreadable: all). Never raises."""
    try:
        after = _counters(places)
        with open("/proc/sys/kernel/pid_max") as f:
            ring = int(f.read())
    except (OSError, StopIteration, ValueError) as error:
        return [f"counters unreadable after the run ({error})"], None
    # the supervisor's own steps between the readings: the second reading's probe, and the run directory and
    # main.py on the workdir's tmpfs (reset._make_run_dir)
    own = {name: 1 for name in (*places, *_IPC_KINDS)}
    own[places[0]] = 3
    slack = SPREAD + 16  # and processes: the checker's and the program's own
    far = [f"{name} counter moved by {after[name] - before[name]}" for name in own
           if not 0 <= after[name] - before[name] <= slack]
    if (after["pid"] - before["pid"]) % ring > slack or after["forks"] - before["forks"] > ring // 2:
        far.append(f"pid counter moved by {(after['pid'] - before['pid']) % ring} "
                   f"({after['forks'] - before['forks']} forks on the host)")
    return far, {name for name in own if after[name] - before[name] != own[name]}
