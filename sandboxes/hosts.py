"""Which Docker engines the sandbox runs on: `sandbox.hosts`, checked, applied process-wide, connected.

A host is what the Docker SDK takes as `base_url`: `unix:///var/run/docker.sock`, `tcp://HOST:2376`
(TLS from the usual DOCKER_TLS_VERIFY / DOCKER_CERT_PATH environment, as `docker` reads it: one certificate
directory for every tcp:// host), `ssh://USER@HOST`
(the SDK's paramiko transport: `pip install 'rlvr[ssh]'`), or `local`: the engine `docker.from_env()` finds
(DOCKER_HOST, else the local socket). An empty list means `local` alone, which is what rlvr did before
hosts existed. Not the SDK's other SSH mode (`use_ssh_client`, the `ssh` binary): its socket reads a pipe
and ignores timeouts, so the host could not enforce a run's wall clock (docker_backend.AgentContainer).

Why the SDK's own connections rather than a distributed engine such as Ray: no new dependency, the same
hardened `create_container` call on every host (docker_backend.py), and every engine is reached the way
`docker -H` reaches it.

Plumbing. `rlvr train`, `rlvr eval` and `rlvr verify` each carry a `sandbox:` block (`SandboxConfig`);
the command calls `apply_hosts(cfg.sandbox.hosts)` before any work, which checks every string and exports
the list as RLVR_SANDBOX_HOSTS (JSON), so that every DockerSandbox made in this process or in a worker
process it starts (they inherit the environment) uses the same engines. `DockerSandbox(hosts=[...])`
given explicitly wins over the environment. An empty `sandbox.hosts` leaves an RLVR_SANDBOX_HOSTS already
exported by the user as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from rlvr.errors import ConfigError

HOSTS_ENV = "RLVR_SANDBOX_HOSTS"
LOCAL = "local"
SCHEMES = ("unix", "tcp", "ssh", "http", "https")


class SandboxUnavailable(RuntimeError):
    """The engine or the image is missing: a setup problem, reported with the command that fixes it."""


@dataclass
class SandboxConfig:
    """The `sandbox:` block of conf/train.yaml, eval.yaml and verify.yaml.

    It lives here, not with the other keys of `rlvr train` in trainer/config.py: the three commands' schemas
    share it, and verifiers/batch.py (VerifyConfig) sits a floor below the trainer, so it cannot import from
    there. Its rule is `check_hosts` below, which `apply_hosts` runs before any work, as it also checks
    RLVR_SANDBOX_HOSTS; a host list is parsed, not bounded, so it carries no trainer/field_rules.py rule."""

    hosts: list = field(default_factory=list)
    """Docker engines for code: local | unix:// | tcp:// | ssh://; []: local."""


def check_host(host: object, where: str = "sandbox.hosts") -> str:
    """`host` if it is a base_url the SDK can reach (or `local`); ConfigError naming `where` and the value otherwise."""
    if not isinstance(host, str) or not host.strip():
        raise ConfigError(f"{where}: each host must be a non-empty string such as unix:///var/run/docker.sock, "
                          f"tcp://HOST:2376, ssh://USER@HOST or local; got {host!r}")
    if host == LOCAL:
        return host
    try:
        parts = urlsplit(host)
        port = parts.port  # ValueError on a port that is not a number in range
    except ValueError as error:
        raise ConfigError(f"{where}: {host!r} is not a host URL ({error})") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"{where}: {host!r} has no scheme the Docker SDK reaches (one of "
                          f"{', '.join(s + '://' for s in SCHEMES)}, or 'local')")
    if parts.scheme == "unix":
        if not parts.path.startswith("/") or parts.netloc:
            raise ConfigError(f"{where}: {host!r}: a unix socket is unix:///ABSOLUTE/PATH")
    elif not parts.hostname:
        raise ConfigError(f"{where}: {host!r} names no host (e.g. {parts.scheme}://HOST{':2376' if parts.scheme != 'ssh' else ''})")
    elif parts.path not in ("", "/") or parts.query:
        raise ConfigError(f"{where}: {host!r}: only {parts.scheme}://HOST[:PORT] is understood")
    del port
    return host


def check_hosts(hosts: object, where: str = "sandbox.hosts") -> list[str]:
    """The checked list (no duplicates); ConfigError naming `where` and the bad value otherwise."""
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise ConfigError(f"{where} must be a list of hosts, e.g. '{where}=[local,ssh://me@box2]'; got {hosts!r}")
    checked = [check_host(h, f"{where}[{i}]") for i, h in enumerate(hosts)]
    seen = set()
    for i, h in enumerate(checked):
        if h in seen:
            raise ConfigError(f"{where}[{i}]: {h!r} is listed twice")
        seen.add(h)
    return checked


def apply_hosts(hosts: object, where: str = "sandbox.hosts") -> list[str]:
    """Check `hosts` and export them (RLVR_SANDBOX_HOSTS) for this process and its children; the hosts in effect."""
    checked = check_hosts(list(hosts) if hosts is not None and not isinstance(hosts, str) else hosts, where)
    if checked:
        os.environ[HOSTS_ENV] = json.dumps(checked)
    return configured_hosts()


def configured_hosts() -> list[str]:
    """The hosts RLVR_SANDBOX_HOSTS names (a JSON list, or comma-separated), else [LOCAL]."""
    raw = os.environ.get(HOSTS_ENV, "").strip()
    if not raw:
        return [LOCAL]
    if raw.startswith("["):
        try:
            hosts = json.loads(raw)
        except ValueError as error:
            raise ConfigError(f"{HOSTS_ENV}: not a JSON list ({error}): {raw!r}") from None
    else:
        hosts = [h.strip() for h in raw.split(",") if h.strip()]
    return check_hosts(hosts, HOSTS_ENV) or [LOCAL]


@contextmanager
def hosts_env(hosts: list[str]) -> Iterator[None]:
    """RLVR_SANDBOX_HOSTS set to `hosts` inside the block (sandboxes made there use them), restored after."""
    before = os.environ.get(HOSTS_ENV)
    os.environ[HOSTS_ENV] = json.dumps(check_hosts(hosts))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(HOSTS_ENV, None)
        else:
            os.environ[HOSTS_ENV] = before


def connect(host: str, timeout: float = 60.0):
    """A docker SDK client for `host` (answering a ping), or SandboxUnavailable naming the host and what to do."""
    try:
        import docker
        from docker.utils import kwargs_from_env
    except ImportError as error:
        raise SandboxUnavailable("the `docker` Python package is missing: pip install 'docker>=7'") from error
    if host != LOCAL and urlsplit(host).scheme == "ssh" and importlib.util.find_spec("paramiko") is None:
        raise SandboxUnavailable(f"sandbox host {host}: ssh:// engines go through the Docker SDK's paramiko "
                                 f"transport: pip install 'rlvr[ssh]' (or paramiko)")
    try:
        if host == LOCAL:
            client = docker.from_env(timeout=int(timeout), max_pool_size=64)
        elif urlsplit(host).scheme in ("tcp", "https") and kwargs_from_env().get("tls"):
            client = _tls_client(host, kwargs_from_env()["tls"], timeout)
        else:
            client = docker.DockerClient(base_url=host, timeout=int(timeout), max_pool_size=64)
        client.ping()
    except Exception as error:
        fix = ("start it with `bash sandboxes/setup_docker.sh` (or `make docker`), or use the local backend"
               if host == LOCAL else "check that the engine runs there and that this machine may reach it")
        raise SandboxUnavailable(f"Docker engine {describe(host)} not reachable ({error.__class__.__name__}: "
                                 f"{str(error)[:200]}); {fix}") from error
    return client


def _tls_client(host: str, tls, timeout: float):
    """A client for a TLS engine that verifies it with the CA of DOCKER_CERT_PATH even when REQUESTS_CA_BUNDLE
    is set: requests lets that variable override a session's own CA file, so the SDK alone fails to verify
    an engine whose CA is not in that bundle (docker/docker-py#2433, open; it failed so here)."""
    import docker

    class EngineCA(docker.APIClient):
        def merge_environment_settings(self, url, proxies, stream, verify, cert):
            settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if isinstance(self.verify, str) and verify is None:  # the engine's CA file, set from DOCKER_CERT_PATH
                settings["verify"] = self.verify
            return settings

    client = docker.DockerClient.__new__(docker.DockerClient)  # DockerClient.__init__ only builds `api`
    client.api = EngineCA(base_url=host, tls=tls, timeout=int(timeout), max_pool_size=64)
    return client


def describe(host: str) -> str:
    """How logs name a host: its URL, `local` as `local (DOCKER_HOST or the default socket)`."""
    if host != LOCAL:
        return host
    return f"local ({os.environ.get('DOCKER_HOST') or 'unix:///var/run/docker.sock'})"
