"""Docker backend: each run goes to a supervisor (agent/supervisor.py) inside a locked-down container.

Every container is created with: `--network none`; a read-only root with size-capped tmpfs at
/sandbox (the workdir root, root's and 0711: each run works in a fresh directory below it; noexec)
and /tmp; `--cap-drop ALL` plus only what the supervisor needs to run programs as other users and
clean up after them (CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETUID, SETGID); `no-new-privileges`; `--pids-limit`; memory equal to memory+swap (no swap); a CPU quota;
`--init`; a private IPC namespace whose SysV limits are those of a tmpfs; an empty environment (nothing from the host); no logging
driver (output is not stored); `--rm`. The supervisor is root and non-dumpable; programs run as
65534 and checkers as 65533, without capabilities (agent/supervisor.py). Inside, the supervisor applies
per-run rlimits, the run clock (agent/clock.py) and the output cap, and kills every leftover process after
each run. The host adds its own wall-clock kill: no reply within `base.host_timeout_s` (the run clock's
backstop, BACKSTOP x wall_s, + HOST_GRACE_S) and the container is removed.

Host and supervisor talk over the container's attached stdin/stdout: one JSON line each way.
Every job carries a fresh id that the reply must echo; a reply with another id, a reply or a
supervisor stderr past its cap (base.reply_cap, STDERR_CAP) destroys the container.
Containers are reused through the warm pool (pool.py); `warm=False` gives a fresh container per
run (the "cold" mode the benchmark compares against). The engines are `hosts` (hosts.py; default: the
local one), each with its own pool; fleet.py spreads runs over them and takes a vanished one out.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import struct
import threading
import time
import uuid
from typing import Any

from rlvr.sandboxes.base import (
    ipc_sysctls,
    STDERR_CAP,
    Checker,
    ExecStatus,
    Execution,
    Limits,
    MiB,
    agent_source,
    host_timeout_s,
    reply_cap,
)
from rlvr.sandboxes.fleet import READMIT_AFTER_S, DockerHost, Fleet
from rlvr.sandboxes.hosts import (  # SandboxUnavailable: importable from here, as it always was
    LOCAL,
    SandboxUnavailable,
    check_hosts,
    configured_hosts,
    connect,
    describe,
)
from rlvr.sandboxes.image import image_present, image_tag
from rlvr.sandboxes.pool import (
    INSTANCE_LABEL,
    LABEL,
    OWNER_LABEL,
    WarmPool,
    _remove_quietly,
    list_sandboxes,
    owner_id,
    sweep_leaked,
)

AGENT_HEADROOM = 64 * MiB  # container memory beyond the program's: python supervisor + init
CHECKER_HEADROOM = 128 * MiB  # and for a checker process beside the program
USER = "0:0"  # the supervisor; it runs programs as PROGRAM_UID and checkers as CHECKER_UID
PROGRAM_UID, CHECKER_UID = 65534, 65533
CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETUID", "SETGID"]
WORKDIR = "/sandbox"
log = logging.getLogger("rlvr.sandboxes")


class AgentGone(Exception):
    """The supervisor's stream closed mid-run."""


class AgentTimeout(Exception):
    """No reply from the supervisor in time."""


def docker_client(timeout: float = 60.0, host: str = LOCAL):
    """A docker SDK client for `host` (default: the local engine), or SandboxUnavailable saying what to do."""
    return connect(host, timeout)


class AgentContainer:
    """One started container running the supervisor, with its attach socket."""

    def __init__(self, client, image: str, limits: Limits, owner: str, one_job: bool, instance: str = ""):
        self.client, self.dirty = client, False
        config = {"workdir": WORKDIR, "one_job": one_job, "watch_host": True,
                  "uids": {"program": PROGRAM_UID, "checker": CHECKER_UID}}
        tmpfs_opts = f"size={int(limits.tmpfs_bytes)},nosuid,nodev,noexec"
        # tmpfs at /sandbox, /tmp and /dev/shm, and SysV shared memory (ipc_sysctls): each at most tmpfs_bytes
        container_memory = int(limits.memory_bytes + 4 * limits.tmpfs_bytes + AGENT_HEADROOM + CHECKER_HEADROOM)
        self.container = client.api.create_container(
            image,
            command=["python3", "-I", "-S", "-c", agent_source(), json.dumps(config)],
            user=USER, working_dir=WORKDIR, environment={}, hostname="sandbox",
            stdin_open=True, detach=False, tty=False, network_disabled=True,  # detach=False: StdinOnce
            labels={LABEL: "1", OWNER_LABEL: owner, INSTANCE_LABEL: instance},
            host_config=client.api.create_host_config(
                network_mode="none", read_only=True,
                tmpfs={WORKDIR: f"{tmpfs_opts},mode=0711", "/tmp": f"{tmpfs_opts},mode=1777"},  # roots: root's
                cap_drop=["ALL"], cap_add=CAPABILITIES, security_opt=["no-new-privileges"], pids_limit=int(limits.pids),
                shm_size=int(limits.tmpfs_bytes),
                sysctls=ipc_sysctls(limits),
                mem_limit=container_memory, memswap_limit=container_memory,
                nano_cpus=int(limits.cpus * 1e9), init=True, auto_remove=True, ipc_mode="private",
                log_config={"type": "none", "config": {}},
                ulimits=[{"name": "core", "soft": 0, "hard": 0}],
            ),
        )["Id"]
        try:
            response_socket = client.api.attach_socket(
                self.container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self._socket_holder = response_socket
            self.sock: socket.socket = getattr(response_socket, "_sock", response_socket)
            client.api.start(self.container)
        except BaseException:
            self.destroy()
            raise
        self._buffer, self._stderr = bytearray(), bytearray()

    def request(self, job: dict[str, Any], timeout: float, reply_cap: int) -> dict[str, Any]:
        """Send one job and wait for its reply line; AgentTimeout or AgentGone otherwise (AgentGone
        also when the reply passes `reply_cap` bytes or does not echo the job's id)."""
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(json.dumps(job).encode() + b"\n")
        except OSError as error:
            raise AgentGone(f"could not send the job: {error}") from error
        deadline = time.monotonic() + timeout
        while (end := self._buffer.find(b"\n")) < 0:
            stream, payload = self._frame(deadline)
            if stream == 1:
                self._buffer.extend(payload)
                if len(self._buffer) > reply_cap:
                    raise AgentGone(f"the supervisor's reply passed {reply_cap} bytes")
            else:
                self._stderr.extend(payload[:max(0, STDERR_CAP - len(self._stderr))])
                if len(payload) and len(self._stderr) >= STDERR_CAP:
                    self.dirty = True
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 1]
        if self._buffer:  # nothing but the reply may come from an honest supervisor
            raise AgentGone("the supervisor sent more than one reply")
        try:
            reply = json.loads(line)
        except ValueError as error:
            raise AgentGone(f"unreadable reply: {error}") from None
        if not isinstance(reply, dict) or reply.get("job_id") != job["job_id"]:
            raise AgentGone("the reply does not carry this job's id")
        return reply

    def _frame(self, deadline: float) -> tuple[int, bytes]:
        header = self._read_exactly(8, deadline)
        stream, size = header[0], struct.unpack(">I", header[4:])[0]
        return stream, self._read_exactly(size, deadline)

    def _read_exactly(self, n: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AgentTimeout()
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(n - len(data))
            except TimeoutError as error:
                raise AgentTimeout() from error
            except OSError as error:
                raise AgentGone(str(error)) from error
            if not chunk:
                raise AgentGone(f"supervisor stream closed; its stderr: {bytes(self._stderr[-500:]).decode(errors='replace')}")
            data += chunk
        return bytes(data)

    def state(self) -> dict[str, Any]:
        try:
            return self.client.api.inspect_container(self.container)["State"]
        except Exception:
            return {}

    def destroy(self) -> None:
        try:
            self.sock.close()
        except Exception:
            pass
        from rlvr.sandboxes.pool import _remove_quietly

        try:
            _remove_quietly(self.client, self.container)
        except Exception:
            pass


class DockerSandbox:
    """`run(program, stdin, limits)` in containers from the warm pool (or a fresh one per run, `warm=False`).

    `hosts`: the Docker engines to run on (hosts.py: `unix://`, `tcp://`, `ssh://` base URLs or `local`);
    None reads RLVR_SANDBOX_HOSTS (what `sandbox.hosts` of a command exported), else the local engine.
    `pool_size` bounds how many runs execute at once on each host (default: the number of CPUs here);
    `capacity` is the total over hosts. Runs go to the least loaded host that is up (fleet.py); a host
    that goes away is marked down and its runs are run again elsewhere. Engines and image are checked
    on first use; SandboxUnavailable says what to run when either is missing.
    """

    def __init__(self, limits: Limits | None = None, pool_size: int | None = None, warm: bool = True,
                 image: str | None = None, hosts: list[str] | None = None, readmit_after_s: float = READMIT_AFTER_S):
        self.limits = limits or Limits()
        self.hosts = (check_hosts(hosts, "DockerSandbox(hosts=...)") or [LOCAL]) if hosts is not None \
            else configured_hosts()
        self.pool_size = pool_size or os.cpu_count() or 2
        self.capacity = self.pool_size * len(self.hosts)
        self.warm, self.image = warm, image
        self.readmit_after_s = readmit_after_s  # how often a down host is tried again (fleet.py)
        self._fleet: Fleet | None = None
        self._lock = threading.Lock()
        self._owner = owner_id()
        self.instance = uuid.uuid4().hex[:12]  # labels this sandbox's containers among its process's

    def _ensure_fleet(self) -> Fleet:
        with self._lock:
            if self._fleet is None:
                self.image = self.image or image_tag()
                engines, unreachable = [], []
                for host in self.hosts:
                    try:
                        client = connect(host)
                    except SandboxUnavailable as error:
                        if len(self.hosts) == 1:
                            raise
                        log.warning("sandbox host %s is down at start: %s", describe(host), error)
                        unreachable.append(str(error))
                        engines.append(DockerHost(host, None, None, down=True))  # tried again later (fleet.py)
                        continue
                    engines.append(DockerHost(host, *self._admit(host, client)))
                if len(unreachable) == len(self.hosts):
                    raise SandboxUnavailable("no sandbox host is reachable: " + "; ".join(unreachable))
                self._fleet = Fleet(engines, admit=self._admit, readmit_after_s=self.readmit_after_s)
            return self._fleet

    def _admit(self, host: str, client=None) -> tuple:
        """(client, a fresh warm pool) for `host`: connected, image checked, leftovers removed: at start, and
        when a down host is tried again (then this sandbox's containers left from before are removed too)."""
        readmitted = client is None
        client = client or connect(host)
        if not image_present(client, self.image):
            where = f" on {describe(host)}" if len(self.hosts) > 1 else ""
            raise SandboxUnavailable(f"sandbox image {self.image} is not built{where}: run `rlvr sandbox build`"
                                     + (" with the same sandbox.hosts" if where else ""))
        sweep_leaked(client)
        if readmitted:
            for container in list_sandboxes(client, f"{INSTANCE_LABEL}={self.instance}"):
                _remove_quietly(client, container["Id"])
        return client, WarmPool(functools.partial(self._create, client), self.pool_size, warm=self.warm)

    def _create(self, client, key: tuple) -> AgentContainer:
        memory_bytes, pids, cpus, tmpfs_bytes = key
        limits = Limits(memory_bytes=memory_bytes, pids=pids, cpus=cpus, tmpfs_bytes=tmpfs_bytes)
        return AgentContainer(client, self.image, limits, self._owner, one_job=not self.warm, instance=self.instance)

    def warmup(self, limits: Limits | None = None) -> None:
        """Start `pool_size` idle containers on every host now, so the first runs do not pay for container start."""
        if self.warm:
            for engine in self._ensure_fleet().engines:
                if not engine.down:
                    engine.pool.warmup(_container_key(limits or self.limits))

    def run(self, program: str, stdin: str = "", limits: Limits | None = None,
            checker: Checker | None = None) -> Execution:
        limits = limits or self.limits
        fleet = self._ensure_fleet()
        job = {"job_id": uuid.uuid4().hex, "program": program, "stdin": stdin, "limits": limits.to_json()}
        if checker is not None:
            job["checker"] = {"program": checker.program, "input": checker.input}
        start = time.monotonic()
        while True:  # once per engine at most: each pass either returns or marks its engine down
            with fleet.checkout() as engine:
                execution, lost = self._run_on(engine, job, limits, start)
            if lost is None:
                return execution
            fleet.mark_down(engine, lost)

    def _run_on(self, engine: Engine, job: dict[str, Any], limits: Limits,
                start: float) -> tuple[Execution | None, str | None]:
        """(the execution, None), or (None, why) when the engine went away and the run has no verdict."""
        try:
            with engine.pool.container(_container_key(limits)) as box:
                try:
                    reply = box.request(job, timeout=host_timeout_s(limits), reply_cap=reply_cap(limits))
                except AgentTimeout:
                    box.dirty = True
                    if not engine.answers():
                        return None, f"no reply within {host_timeout_s(limits):.0f}s and no answer to a ping"
                    return Execution.failure(
                        f"sandbox: no reply within {host_timeout_s(limits):.0f}s; container killed",
                        ExecStatus.TIMEOUT, time.monotonic() - start), None
                except AgentGone as gone:
                    box.dirty = True
                    if not engine.answers():
                        return None, f"the stream broke ({str(gone)[:80]}) and no answer to a ping"
                    return _supervisor_died(box.state(), str(gone), time.monotonic() - start), None
                except BaseException:
                    box.dirty = True  # e.g. KeyboardInterrupt mid-reply: the stream is out of step now
                    raise
                box.dirty = box.dirty or bool(reply.get("dirty", True))
                return Execution.from_agent(reply), None
        except SandboxUnavailable:
            raise
        except Exception as error:  # engine hiccup: this run failed, the caller decides what that means
            if not engine.answers():
                return None, f"{error.__class__.__name__}: {str(error)[:80]} and no answer to a ping"
            return Execution.failure(f"sandbox error: {error.__class__.__name__}: {error}",
                                     wall_s=time.monotonic() - start), None

    def close(self) -> None:
        """Remove every container this sandbox started, on every host."""
        with self._lock:
            fleet, self._fleet = self._fleet, None
        if fleet is not None:
            fleet.close()


def _container_key(limits: Limits) -> tuple:
    return (int(limits.memory_bytes), int(limits.pids), float(limits.cpus), int(limits.tmpfs_bytes))


def _supervisor_died(state: dict[str, Any], why: str, wall_s: float) -> Execution:
    """The supervisor's stream broke mid-run (it died, or its reply was over the cap, unreadable or
    for another job): the container is destroyed and the run is a sandbox error, never a verdict."""
    if state.get("OOMKilled"):
        return Execution.failure("sandbox: the container ran out of memory", ExecStatus.MEMORY_LIMIT, wall_s)
    return Execution.failure(f"sandbox: the supervisor's stream broke; container destroyed: {why}",
                             ExecStatus.ERROR, wall_s)
