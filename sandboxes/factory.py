"""`get_sandbox(backend)`: a sandbox by backend name. The interface (base.py) declares what a sandbox
offers and imports no backend; the backends import base.py; this module imports the backends, each
only when asked for (so `local` never loads the docker client)."""

from __future__ import annotations

from typing import Any

from rlvr.sandboxes.base import Sandbox

BACKENDS = ("docker", "local")


def get_sandbox(backend: str = "docker", **options: Any) -> Sandbox:
    """A sandbox by backend name; `options` go to the backend's constructor."""
    if backend == "docker":
        from rlvr.sandboxes.docker_backend import DockerSandbox

        return DockerSandbox(**options)
    if backend == "local":
        from rlvr.sandboxes.local_backend import LocalSandbox

        return LocalSandbox(**options)
    raise ValueError(f"unknown sandbox backend {backend!r}; available: {', '.join(BACKENDS)}")
