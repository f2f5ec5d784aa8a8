"""Typed schema of `rlvr audit`'s config (conf/audit.yaml), so a misspelt key fails at start, naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from rlvr.sandboxes.hosts import SandboxConfig


@dataclass
class AuditSettings:
    rows: int = 8
    """Rows of the environment to build completions from (each row gives every class's completions)."""
    split: str = "test"
    """The split the rows come from."""
    seed: int = 0
    """Seeds the rows drawn."""
    max_accept: float = 0.0
    """The audit fails when an attack class is accepted on more than this share of its completions."""
    max_false_negative: float = 0.0
    """The audit fails when a gated honest class is refused on more than this share of its completions."""
    correct_at: Optional[float] = None
    """null: accepted = status correct (the reward's own threshold); a number: accepted = reward >= it."""
    classes: list = field(default_factory=list)
    """Only these classes (names from docs/audit.md); []: all."""
    allow: list = field(default_factory=list)
    """Attack classes reported but never failing the audit: acceptances you have judged and accept."""


@dataclass
class AuditConfig:
    env: Any = field(default_factory=lambda: {"name": "arithmetic"})
    """The environment whose rows (and, unless verifier= is given, whose reward) are audited."""
    verifier: Optional[str] = None
    """A single verifier to audit on the environment's rows instead of its reward (math, code, python, ...)."""
    params: Any = field(default_factory=dict)
    """The verifier's parameters, e.g. +params.function=my_rewards:accuracy."""
    audit: AuditSettings = field(default_factory=AuditSettings)
    output_dir: str = "outputs/audit/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    """audit.json and audit.md go here."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # Docker engines for code (rlvr.sandboxes.hosts)


def register_audit_schema() -> None:
    from rlvr.trainer.config import register_resolvers

    register_resolvers()
    ConfigStore.instance().store(name="audit_schema", node=AuditConfig)
