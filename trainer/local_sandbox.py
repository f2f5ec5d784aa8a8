"""A run whose reward runs code in the local sandbox backend (`backend=local`: bubblewrap on this machine, no
Docker) says at start what that backend cannot contain here, one warning line per weakness: the list
`rlvr sandbox doctor` prints (sandboxes/doctor.py's `local_limitations`, measured by one run on this machine), read
from there so that the run and the doctor never disagree."""

from __future__ import annotations

LOCAL = "local"


def uses_local_sandbox(env) -> bool:
    """Whether `env` runs code in the local backend: its own programs (code_feedback's tests between turns) or a
    reward component's (the code verifier)."""
    if getattr(env, "backend", None) == LOCAL:
        return True
    components = getattr(getattr(env, "verifier", None), "components", None) or []
    return any(getattr(component.verifier, "backend", None) == LOCAL for component in components)


def local_sandbox_warnings(env) -> list[str]:
    """One warning line per weakness of the local backend on this machine, when `env` uses it; else none."""
    if not uses_local_sandbox(env):
        return []
    from rlvr.sandboxes.doctor import local_limitations

    try:
        weaknesses = local_limitations()
    except Exception as error:  # noqa: BLE001 - the run's own sandbox will fail the same way; say it here first
        return [f"warning: the local sandbox backend could not run a program here ({type(error).__name__}: {error})"]
    said = "warning: the local sandbox backend does not contain this (rlvr sandbox doctor --backend local)"
    return [f"{said}: {line}" for line in weaknesses]
