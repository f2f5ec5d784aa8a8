"""The typed outcome of one verification: a reward plus a status that says why.

Verifiers never turn a failure into a bare 0.0; the status lets the trainer count and log
each kind of outcome, and `details` carries what was extracted and why.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """Why a completion got its reward. The values are the strings written to JSONL and metrics."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    UNPARSABLE = "unparsable"  # no answer could be extracted or parsed from the model's text
    TIMEOUT = "timeout"
    ERROR = "error"  # the record (not the model) was bad, or the verifier itself failed
    RUNTIME_ERROR = "runtime_error"  # code verifiers: the program crashed
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"


@dataclass(frozen=True)
class VerifyResult:
    """One completion's score: `reward` (usually in [0, 1]), `status`, and JSON-friendly `details`."""

    reward: float
    status: Status
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The form written to `rlvr verify` output and samples.jsonl."""
        return {"reward": float(self.reward), "status": self.status.value, "details": self.details}
