"""Verifiers: score one completion against a record and return a typed `VerifyResult`."""

if __name__ != "rlvr.verifiers":  # the folder is mapped to rlvr.verifiers; a bare `verifiers` is another package
    raise ImportError("import this package as rlvr.verifiers, not as a bare 'verifiers' (see pyproject's package-dir)")

from rlvr.verifiers.result import Status, VerifyResult  # noqa: E402
from rlvr.verifiers.registry import build_verifier, register_verifier  # noqa: E402
from rlvr.verifiers.compose import build_reward  # noqa: E402

__all__ = ["Status", "VerifyResult", "build_reward", "build_verifier", "register_verifier"]
