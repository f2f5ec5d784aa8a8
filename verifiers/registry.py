"""The verifiers' registry: built-in verifiers by name, plugins from the entry-point group `rlvr.verifiers`.

`@register_verifier("NAME")` registers a class or function in-tree; its module goes in the built-in list below,
which is imported on the first lookup. The lookup itself (plugins, signature checks) is rlvr/registry.py's.
"""

from __future__ import annotations

from typing import Any

from rlvr.errors import ConfigError, UnknownNameError  # noqa: F401  (re-exported: plugins import them from here)
from rlvr.registry import Registry

verifier_registry = Registry("verifier", "rlvr.verifiers", (
    "rlvr.verifiers.format", "rlvr.verifiers.exact", "rlvr.verifiers.countdown", "rlvr.verifiers.code.verifier",
    "rlvr.verifiers.math.verifier", "rlvr.verifiers.reasoning_gym", "rlvr.verifiers.canary", "rlvr.verifiers.vf.verifier",
    "rlvr.verifiers.python.verifier", "rlvr.verifiers.judge.verifier"))
register_verifier = verifier_registry.register

# the record fields each built-in verifier reads (docs/verify.md); a plugin's are its own business
RECORD_FIELDS = {"math": ("answer",), "exact": ("answer",), "code": ("tests",), "countdown": ("numbers", "target"),
                 "reasoning_gym": ("rg_entry", "rg_task")}


def build_verifier(name: str, **config: Any) -> Any:
    """A verifier instance by name (built-in or plugin), its config checked first."""
    return verifier_registry.build(name, **config)
