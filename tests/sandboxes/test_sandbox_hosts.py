"""`sandbox.hosts`: code verification over several Docker engines, and an engine that goes away mid-batch.

The second engine is a real dockerd started here on its own unix socket, data root and exec root
(short paths: the exec root holds containerd's socket, whose path length is bounded), beside the
machine's default engine, which these tests never stop, reconfigure or remove images from. The image
reaches it the way a user's would: `rlvr sandbox build --hosts local,unix://...` copies it engine to engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rlvr.errors import ConfigError
from rlvr.sandboxes.hosts import HOSTS_ENV, LOCAL, apply_hosts, check_hosts, configured_hosts

REPO = Path(__file__).resolve().parents[2]


# ---- hosts as a user writes them (no engine needed) ----

@pytest.mark.parametrize("bad, says", [
    ("ftp://box", "no scheme"), ("tcp://", "names no host"), ("unix://relative.sock", "unix:///ABSOLUTE/PATH"),
    ("ssh://me@box:22x", "not a host URL"), ("", "non-empty string"), (7, "non-empty string"),
    ("tcp://box:2376/v1", "only tcp://HOST[:PORT]"),
])
def test_a_bad_host_names_the_field_and_the_value(bad, says):
    with pytest.raises(ConfigError, match="sandbox.hosts\\[1\\]") as caught:
        check_hosts(["local", bad])
    assert says in str(caught.value) and (repr(bad) in str(caught.value) or bad == "")


def test_hosts_as_a_user_writes_them_are_taken():
    hosts = ["local", "unix:///var/run/docker.sock", "tcp://10.0.0.2:2376", "ssh://me@gpu-box", "ssh://me@gpu-box:2222"]
    assert check_hosts(hosts) == hosts
    with pytest.raises(ConfigError, match="listed twice"):
        check_hosts(["local", "local"])
    with pytest.raises(ConfigError, match="must be a list"):
        check_hosts("tcp://box:2376")


def test_apply_exports_the_hosts_for_worker_processes(monkeypatch):
    monkeypatch.delenv(HOSTS_ENV, raising=False)
    assert apply_hosts([]) == [LOCAL]  # empty: the local engine, and nothing exported
    assert HOSTS_ENV not in os.environ
    assert apply_hosts(["local", "unix:///tmp/x.sock"]) == ["local", "unix:///tmp/x.sock"]
    child = subprocess.run([sys.executable, "-c", "from rlvr.sandboxes.hosts import configured_hosts; "
                            "print(configured_hosts())"], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "['local', 'unix:///tmp/x.sock']"
    assert apply_hosts([]) == ["local", "unix:///tmp/x.sock"]  # an empty key leaves an exported list alone
    monkeypatch.setenv(HOSTS_ENV, "local, ssh://me@box2")  # a hand-exported comma list reads too
    assert configured_hosts() == ["local", "ssh://me@box2"]


def test_every_command_config_has_the_key_and_refuses_a_bad_host(tmp_path, monkeypatch, capsys):
    from hydra import compose, initialize_config_module

    from rlvr.cli import main
    from rlvr.trainer.config import register_schemas
    from rlvr.trainer.evaluation.eval_config import register_eval_schema
    from rlvr.verifiers.batch import register_schema

    register_schemas(), register_eval_schema(), register_schema()
    with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
        for name in ("train", "eval", "verify"):
            cfg = compose(config_name=name, overrides=["input=a", "output=b"] if name == "verify" else [])
            assert list(cfg.sandbox.hosts) == [], name
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(HOSTS_ENV, raising=False)
    (tmp_path / "in.jsonl").write_text(json.dumps({"verifier": "exact", "completion": "1", "answer": "1"}) + "\n")
    commands = [["verify", "input=in.jsonl", "output=out.jsonl"], ["train", f"output_dir={tmp_path / 'run'}"],
                ["eval", "model.name_or_path=tiny", f"output_dir={tmp_path / 'eval'}"]]
    for command in commands:
        with pytest.raises(SystemExit) as stopped:
            main([*command, "sandbox.hosts=[local,tpc://box:2376]"])
        assert str(stopped.value).startswith(f"rlvr {command[0]}: sandbox.hosts[1]: 'tpc://box:2376'"), stopped.value
    assert not (tmp_path / "out.jsonl").exists() and HOSTS_ENV not in os.environ


def test_an_ssh_host_without_paramiko_says_what_to_install(monkeypatch):
    import importlib.util

    from rlvr.sandboxes.hosts import SandboxUnavailable, connect

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "paramiko" else real(name, *a))
    with pytest.raises(SandboxUnavailable, match=r"ssh://me@box3: .*pip install 'rlvr\[ssh\]'"):
        connect("ssh://me@box3")


def test_a_down_engine_is_probed_in_the_background_until_it_is_readmitted():
    """fleet.py with stand-in pools: a host down at start is probed at checkouts, no more often than
    readmit_after_s, never blocking one, and takes runs once a probe admits it."""
    from rlvr.sandboxes.fleet import DockerHost, Fleet

    class Pool:
        size = 1

        def close(self):
            pass

    attempts = []

    def admit(host):
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise ConnectionError("still down")
        return "client-b", Pool()

    local, remote = DockerHost("local", "client-a", Pool()), DockerHost("unix:///tmp/b.sock", None, None, down=True)
    fleet = Fleet([local, remote], admit=admit, readmit_after_s=0.5)
    for _ in range(200):  # liveness: each checkout may start a probe; the second attempt admits it
        with fleet.checkout() as engine:
            assert engine is local or not remote.down
        if not remote.down:
            break
        time.sleep(0.02)
    assert not remote.down and remote.client == "client-b" and len(attempts) == 2
    assert attempts[1] - attempts[0] >= 0.5  # the failed probe waited its interval before the next
    with fleet.checkout() as first, fleet.checkout() as second:
        assert {first.host, second.host} == {"local", "unix:///tmp/b.sock"}  # both take runs now


# ---- a second real engine ----

class SecondEngine:
    """A dockerd of our own, data and exec roots under DIR, killed and cleaned up by the test. It listens on
    `unix://DIR/d.sock`, or with `tls` on `tcp://127.0.0.1:PORT` with --tlsverify and certificates made here
    by openssl (a CA, the engine's, a client's in DIR/certs, named as DOCKER_CERT_PATH expects)."""

    def __init__(self, tls: bool = False):
        self.dir = Path(tempfile.mkdtemp(prefix="rd", dir="/tmp"))
        self.process: subprocess.Popen | None = None
        self.tls_env: dict[str, str] = {}
        self.listen = [f"unix://{self.dir}/d.sock"]
        if tls:
            import socket

            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            certs = self.dir / "certs"
            _make_certificates(certs)
            self.tls_env = {"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(certs)}
            self.listen = [f"tcp://127.0.0.1:{port}", "--tlsverify", "--tlscacert", str(certs / "ca.pem"),
                           "--tlscert", str(certs / "server-cert.pem"), "--tlskey", str(certs / "server-key.pem")]
        self.host = self.listen[0]

    def start(self) -> None:
        command = ["dockerd", "--host", *self.listen, "--data-root", str(self.dir / "data"), "--exec-root",
                   str(self.dir / "x"), "--pidfile", str(self.dir / "pid"), "--iptables=false", "--ip6tables=false",
                   "--bridge=none"]
        with open(self.dir / "log", "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(300):  # liveness: up to a minute for the engine to answer
            if self.process.poll() is not None:
                raise RuntimeError(f"dockerd exited {self.process.returncode}: {(self.dir / 'log').read_text()[-2000:]}")
            try:
                self.client().ping()
                return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError(f"dockerd did not answer: {(self.dir / 'log').read_text()[-2000:]}")

    def client(self):
        import docker

        if not self.tls_env:
            return docker.DockerClient(base_url=self.host, timeout=5)
        from rlvr.sandboxes.hosts import _tls_client

        certs = Path(self.tls_env["DOCKER_CERT_PATH"])
        tls = docker.tls.TLSConfig(client_cert=(str(certs / "cert.pem"), str(certs / "key.pem")),
                                   ca_cert=str(certs / "ca.pem"), verify=True)
        return _tls_client(self.host, tls, 5)

    def kill(self) -> None:
        """SIGKILL: the engine vanishes mid-call (its containers keep running, orphaned, until `remove`)."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # dockerd stops its containers and its containerd
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def remove(self) -> list[int]:
        """Stop the engine (SIGTERM: it stops its containers and its containerd), then kill by pid whatever
        still runs from DIR (after a SIGKILL: the dead engine's container shims, with their containers; a
        restart on the same roots does not reliably clean them, containerd timed out starting here) and remove
        their cgroups; unmount what is mounted under DIR and delete DIR. Returns the pids this last step killed."""
        self.stop()
        stragglers = _processes_mentioning(str(self.dir))
        for pid, args in stragglers.items():
            for child in reversed(_descendants(pid)):
                _kill(child)
            _kill(pid)
            if "-id" in args:
                container = args[args.index("-id") + 1]
                for cgroup in Path("/sys/fs/cgroup").glob(f"**/docker/{container}"):
                    for _ in range(50):  # the kernel frees a cgroup a moment after its last process
                        try:
                            cgroup.rmdir()
                            break
                        except OSError:
                            time.sleep(0.1)
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(self.dir))]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        return sorted(stragglers)


def _make_certificates(certs: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as `dockerd --tlsverify` and
    DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem) expect them."""
    certs.mkdir(parents=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=certs, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1",
            "-subj", "/CN=rlvr-test-ca")
    for name, subject, usage in (("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                                 ("client", "/CN=rlvr-test", "extendedKeyUsage=clientAuth")):
        key, cert = ("server-key.pem", "server-cert.pem") if name == "server" else ("key.pem", "cert.pem")
        (certs / f"{name}.ext").write_text(usage + "\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", f"{name}.csr", "-subj", subject)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
                "-out", cert, "-days", "1", "-extfile", f"{name}.ext")


def _processes_mentioning(text: str) -> dict[int, list[str]]:
    """pid -> argv of every process whose command line contains `text` (our own dirs: only ours match)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                args = proc.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if any(text in a for a in args):
                found[int(proc.name)] = args
    return found


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int(proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    order, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            order.append(child)
            stack.append(child)
    return order


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _second_engine(tls: bool = False):
    from tests.sandboxes.test_sandbox_docker import require_docker

    require_docker()
    if os.geteuid() != 0 or shutil.which("dockerd") is None or (tls and shutil.which("openssl") is None):
        pytest.skip("a second engine needs root and dockerd (Debian's docker.io), and openssl for TLS")
    engine = SecondEngine(tls=tls)
    try:
        engine.start()
        built = subprocess.run([sys.executable, "-m", "rlvr", "sandbox", "build", "--hosts", f"local,{engine.host}"],
                               capture_output=True, text=True, cwd=REPO, timeout=600, env={**os.environ, **engine.tls_env})
        assert built.returncode == 0, built.stderr[-2000:]
        assert "copying" in built.stdout, built.stdout
        yield engine
    finally:
        stragglers = engine.remove()
        print(f"second engine removed; its processes the teardown killed by pid: {stragglers}")


@pytest.fixture
def second_engine():
    yield from _second_engine()


@pytest.fixture
def tls_engine():
    yield from _second_engine(tls=True)


def _code(program: str) -> str:
    return f"```python\n{program}\n```"


def _records(n: int, pause_s: float = 0.0) -> list[dict]:
    """n code records whose verdicts are known by construction: correct, incorrect, runtime_error in turn."""
    pause = f"import time; time.sleep({pause_s})\n" if pause_s else ""
    programs = [pause + "a, b = map(int, input().split()); print(a + b)",
                pause + "a, b = map(int, input().split()); print(a - b)",
                pause + "raise SystemExit('no')"]
    records = []
    for i in range(n):
        records.append({"id": i, "verifier": "code", "completion": _code(programs[i % 3]),
                        "tests": {"kind": "stdio", "cases": [{"stdin": f"{i} 2\n", "stdout": f"{i + 2}\n"}]}})
    return records


EXPECTED = ["correct", "incorrect", "runtime_error"]


def _created(client, since: float) -> int:
    """Sandbox containers this engine created since `since` (its own event log)."""
    events = client.api.events(since=int(since), until=int(time.time()) + 1, decode=True,
                               filters={"type": "container", "event": "create", "label": "rlvr.sandbox"})
    return sum(1 for _ in events)


def _verify(tmp_path: Path, records: list[dict], *overrides: str, env: dict | None = None) -> list[dict]:
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    env = {**{k: v for k, v in os.environ.items() if k != HOSTS_ENV}, **(env or {})}
    done = subprocess.run([sys.executable, "-m", "rlvr", "verify", f"input={src}", f"output={dst}", "workers=4",
                           "+params.workers=2", *overrides], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in dst.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.xdist_group("sandbox")
def test_two_engines_give_the_verdicts_of_one_and_both_run_containers(second_engine, tmp_path):
    """Also: the janitor runs on every host (a dead owner's container on the second engine is removed)."""
    from tests.sandboxes.test_sandbox_docker import require_docker, wait_until_gone
    from rlvr.sandboxes.base import Limits
    from rlvr.sandboxes.docker_backend import AgentContainer
    from rlvr.sandboxes.image import image_tag
    from rlvr.sandboxes.pool import LABEL, OWNER_LABEL, owner_id

    local, second = require_docker(), second_engine.client()
    records = _records(12)
    one = _verify(tmp_path, records)
    dead_owner = owner_id().rsplit(":", 2)[0] + ":999999999:0"  # a process of this machine that is gone
    leaked = AgentContainer(second, image_tag(), Limits(), dead_owner, one_job=False)
    time.sleep(1.1)  # the engines' event clocks count whole seconds here
    since = time.time()
    try:
        two = _verify(tmp_path, records, f"sandbox.hosts=[local,{second_engine.host}]")
        assert wait_until_gone(second, f"{OWNER_LABEL}={dead_owner}") == []  # the janitor ran on the second host too
    finally:
        leaked.destroy()
    assert [(r["status"], r["reward"]) for r in two] == [(r["status"], r["reward"]) for r in one]
    assert [r["status"] for r in two] == [EXPECTED[i % 3] for i in range(12)]
    on_local, on_second = _created(local, since), _created(second, since)
    assert on_local >= 1 and on_second >= 1, (on_local, on_second)
    assert wait_until_gone(second, LABEL) == []  # the command removed its containers on both engines


@pytest.mark.slow
@pytest.mark.xdist_group("sandbox")
def test_an_engine_killed_mid_batch_costs_no_verdict_and_leaves_nothing(second_engine, monkeypatch, caplog):
    from tests.sandboxes.test_sandbox_docker import require_docker, wait_until_gone
    from rlvr.sandboxes.pool import INSTANCE_LABEL
    from rlvr.verifiers.code.verifier import CodeVerifier

    local = require_docker()
    monkeypatch.setenv(HOSTS_ENV, json.dumps([LOCAL, second_engine.host]))  # as `sandbox.hosts` exports it
    records = _records(18, pause_s=1.0)
    verifier = CodeVerifier(timeout_s=10, workers=2)  # 2 containers per engine, 4 runs at once
    assert verifier.sandbox.hosts == [LOCAL, second_engine.host] and verifier.sandbox.capacity == 4
    finished = 0

    def progress(k: int) -> None:
        nonlocal finished
        finished += k
        if finished >= 4 and second_engine.process.poll() is None:
            second_engine.kill()  # runs are in flight on it now: each takes a second or more

    with caplog.at_level("WARNING", logger="rlvr.sandboxes"):
        try:
            results = verifier.verify_batch([r["completion"] for r in records], records, progress=progress)
            instance = verifier.sandbox.instance
        finally:
            verifier.close()
    assert [r.status.value for r in results] == [EXPECTED[i % 3] for i in range(18)], [r.details for r in results]
    down = [r.getMessage() for r in caplog.records if "is down" in r.getMessage()]
    assert len(down) == 1 and second_engine.host in down[0], down  # one line, naming the host
    assert wait_until_gone(local, f"{INSTANCE_LABEL}={instance}") == []


@pytest.mark.slow
@pytest.mark.xdist_group("sandbox")
def test_no_engine_left_is_a_clear_error(second_engine, monkeypatch):
    from rlvr.sandboxes.base import Limits
    from rlvr.sandboxes.docker_backend import DockerSandbox, SandboxUnavailable

    sandbox = DockerSandbox(pool_size=1, hosts=[second_engine.host])
    try:
        assert sandbox.run("print(6 * 7)", limits=Limits(wall_s=5)).stdout == "42\n"
        second_engine.kill()
        with pytest.raises(SandboxUnavailable, match="every sandbox host is down: " + second_engine.host):
            sandbox.run("print(6 * 7)", limits=Limits(wall_s=5))
    finally:
        sandbox.close()


@pytest.mark.slow
@pytest.mark.xdist_group("sandbox")
def test_an_engine_that_comes_back_is_readmitted(second_engine, caplog):
    """Stopped (its runs go to the other engine), started again on the same roots (a restart), it takes runs
    again after `readmit_after_s`, with one line saying so; every verdict stays right throughout."""
    from tests.sandboxes.test_sandbox_docker import require_docker, wait_until_gone
    from rlvr.sandboxes.base import Limits
    from rlvr.sandboxes.docker_backend import DockerSandbox
    from rlvr.sandboxes.pool import INSTANCE_LABEL

    local = require_docker()
    sandbox = DockerSandbox(pool_size=1, hosts=[LOCAL, second_engine.host], readmit_after_s=1.0)
    limits = Limits(wall_s=10)

    def served() -> dict[str, int]:
        return {e.host: e.served for e in sandbox._ensure_fleet().engines}

    def run(i: int) -> None:
        assert sandbox.run(f"print({i} * 7)", limits=limits).stdout == f"{i * 7}\n"

    with caplog.at_level("WARNING", logger="rlvr.sandboxes"):
        try:
            for i in range(4):  # one at a time: the engines alternate
                run(i)
            assert served()[second_engine.host] >= 1
            second_engine.stop()
            for i in range(4, 8):
                run(i)  # one of these finds it gone: marked down, run again on the local engine
            assert [e.down for e in sandbox._ensure_fleet().engines] == [False, True]
            before = served()[second_engine.host]
            second_engine.start()
            for i in range(8, 400):  # liveness: a probe starts at the next checkout past readmit_after_s
                run(i)
                if served()[second_engine.host] > before + 2:
                    break
                time.sleep(0.1)
            assert served()[second_engine.host] > before + 2  # it takes runs again, and they are right
            instance = sandbox.instance
        finally:
            sandbox.close()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("is down" in line for line in lines) == 1
    assert sum("answers again" in line and second_engine.host in line for line in lines) == 1
    assert wait_until_gone(local, f"{INSTANCE_LABEL}={instance}") == []
    assert wait_until_gone(second_engine.client(), f"{INSTANCE_LABEL}={instance}") == []


@pytest.mark.slow
@pytest.mark.xdist_group("sandbox")
def test_a_tcp_engine_with_tls_gives_the_same_verdicts(tls_engine, tmp_path):
    """tcp:// with TLS from DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, with REQUESTS_CA_BUNDLE pointing elsewhere
    (a CA bundle without the engine's CA: the SDK alone then fails to verify the engine)."""
    import certifi

    records = _records(9)
    env = {**tls_engine.tls_env, "REQUESTS_CA_BUNDLE": certifi.where()}
    time.sleep(1.1)  # the engine's event clock counts whole seconds here
    since = time.time()
    two = _verify(tmp_path, records, f"sandbox.hosts=[local,{tls_engine.host}]", env=env)
    assert [r["status"] for r in two] == [EXPECTED[i % 3] for i in range(9)]
    assert _created(tls_engine.client(), since) >= 1
