"""`rlvr sandbox doctor`: is the engine reachable, is the image built, and is every probe contained?

Prints one table row per adversarial probe (probes.py) with the status it ended with, whether it
was contained, and whether the next run in the same pool found a clean sandbox. Callers above
this package (the CLI) may pass extra rows, e.g. the code verifier's anti-cheating probes. For
the local backend it first says plainly what that backend cannot contain on this machine. "Left
behind" counts only containers this doctor process started; other processes' live pools are not
its business (their own janitor removes them once their owner is gone).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from rlvr.sandboxes.factory import get_sandbox
from rlvr.sandboxes.hosts import LOCAL, configured_hosts, describe, hosts_env
from rlvr.sandboxes.probes import PROBES, HostFixtures, run_probe

Row = tuple[str, str, bool, str]  # probe, outcome, contained, note


def engine_report(log: Callable[[str], None] = print, host: str = LOCAL, named: bool = False) -> bool:
    """Print the state of `host`'s engine and image (`named`: the host's name on each line); True when both are ready."""
    from rlvr.sandboxes.docker_backend import SandboxUnavailable, docker_client
    from rlvr.sandboxes.image import image_present, image_tag

    where = f"{describe(host)} " if named else ""
    try:
        client = docker_client(timeout=10, host=host)
    except SandboxUnavailable as error:
        log(f"engine:  {where}NOT REACHABLE - {error}")
        return False
    version = client.version()
    log(f"engine:  {where}reachable (Docker {version.get('Version')}, API {version.get('ApiVersion')})")
    tag = image_tag()
    present = image_present(client, tag)
    log(f"image:   {where}{tag} {'present' if present else 'MISSING - run `rlvr sandbox build`'}")
    return present


def probe_rows(backend: str = "docker") -> Iterable[Row]:
    """Run every probe for `backend` in one sandbox (pool of 1); yield a row as each finishes."""
    sandbox = get_sandbox(backend, **({"pool_size": 1} if backend == "docker" else {}))
    try:
        with HostFixtures() as host:
            for probe in PROBES:
                if backend not in probe.backends:
                    yield probe.name, "n/a", True, probe.note
                    continue
                start = time.monotonic()
                execution, problem = run_probe(sandbox, probe, host)
                outcome = f"{execution.status.value} (exit {execution.exit_code}, {time.monotonic() - start:.1f}s)"
                yield probe.name, outcome, problem is None, problem or probe.note
    finally:
        sandbox.close()


def print_table(rows: Iterable[Row], log: Callable[[str], None] = print) -> bool:
    """Print rows as a Markdown table as they come; True when every row was contained."""
    log("| probe | outcome | contained | note |")
    log("|---|---|---|---|")
    ok = True
    for name, outcome, contained, note in rows:
        ok &= contained
        log(f"| {name} | {outcome} | {'yes' if contained else 'NO'} | {note} |")
    return ok


def doctor(backend: str = "docker", extra_rows: Callable[[], Iterable[Row]] | None = None,
           log: Callable[[str], None] = print) -> int:
    """The whole report; exit code 0 when everything is ready and contained. Docker: every host of
    RLVR_SANDBOX_HOSTS (hosts.py) in turn, each with its own probe tables; local: this machine."""
    if backend == "local":
        for line in local_limitations():
            log(f"NOT CONTAINED (local backend): {line}")
        return _probe_report(backend, extra_rows, log)
    hosts = configured_hosts()
    ready = [engine_report(log, host, named=len(hosts) > 1) for host in hosts]
    if not all(ready):
        return 1
    code = 0
    for host in hosts:
        with hosts_env([host]):  # the probes' sandboxes (and the code verifier's) run on this host alone
            code |= _probe_report(backend, extra_rows, log, host if len(hosts) > 1 else None)
    return code


def _probe_report(backend: str, extra_rows: Callable[[], Iterable[Row]] | None, log: Callable[[str], None],
                  host: str | None = None) -> int:
    on = f" on {describe(host)}" if host else ""
    log(f"\nadversarial probes ({backend} backend{on}; each followed by a run that must find a clean sandbox):\n")
    ok = print_table(probe_rows(backend), log)
    if extra_rows is not None:
        log(f"\ncode verifier{on} (a completion that cheats must not pass):\n")
        ok &= print_table(extra_rows(), log)
    leftovers = _leftover_containers(host=host or LOCAL) if backend == "docker" else []
    log(f"\nleft behind by this doctor{on}: {', '.join(leftovers) if leftovers else 'no containers'}")
    return 0 if ok and not leftovers else 1


def local_limitations() -> list[str]:
    """What the local backend does not contain here, measured by one run (sandboxes/README.md)."""
    from rlvr.sandboxes.local_backend import LocalSandbox

    sandbox = LocalSandbox(workers=1)
    sandbox.run("pass")
    lines = ["the program sees /usr, the merged-/usr links, a few /etc files (ld.so.cache, localtime, passwd, group, "
             "nsswitch.conf, alternatives) and the interpreter's prefix, read-only (bubblewrap's fresh root: no host "
             "socket, /run or /home exists inside)",
             ("no seccomp: the whole syscall surface is exposed (a kernel exploit escapes; the run's leased uid has "
              "host keyrings, its persistent one too, emptied before and after every run)")]
    if sandbox.cgroup is None:
        lines.append("no cgroup per run (" + ("not root" if not sandbox.root else "none could be made") + "): memory "
                     "is bounded per process (address space) and SysV segments by the IPC sysctls, but memfd and "
                     "tmpfs pages a program unmaps are not bounded per run, nor its processes as a whole")
    if not sandbox.root:
        lines.append("not root: program, checker and supervisor share one user (uid 0 of a user namespace, no "
                     "capabilities), so the program can list their descriptors and stop or kill the checker (no "
                     "verdict then, never a pass), though not open their descriptors or memory (non-dumpable); "
                     "it keeps the user's supplementary groups (a user namespace cannot drop them; nothing they open "
                     "is bound inside); "
                     "no process limit applies; the probes 'write outside the workdir' (uid 0) and 'reach the "
                     "supervisor' (fd listing, a signal to PID 1 that the kernel drops) report NO for this")
    if sandbox.fs_problem:
        lines.append(sandbox.fs_problem)
    return lines


def _leftover_containers(owner: str | None = None, host: str = LOCAL) -> list[str]:
    """This process's sandbox containers (`owner`: another owner id) on `host` still present once --rm is done."""
    from rlvr.sandboxes.docker_backend import docker_client
    from rlvr.sandboxes.pool import OWNER_LABEL, list_sandboxes, owner_id

    client = docker_client(timeout=10, host=host)
    label = f"{OWNER_LABEL}={owner or owner_id()}"
    deadline = time.monotonic() + 10
    while True:  # --rm removal finishes a moment after the kill
        found = [c["Id"][:12] for c in list_sandboxes(client, label)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
