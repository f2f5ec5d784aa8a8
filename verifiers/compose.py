"""Several verifiers as one reward: a weighted sum, where a component may be gated on another.

Spec (a list, one dict per component; Hydra's `reward:` list in env configs):
    {"verifier": "exact", "weight": 0.9, "gate": "format", "params": {...}, "name": "exact"}
`name` defaults to the verifier's name (`python`: its function's, verifiers/python/verifier.py).
`gate` names another component; the gated one counts only when its gate is CORRECT (so a
right answer in a broken format earns nothing). The composite's status is the first component's,
unless that one was gated off, then the gate's (which is then never CORRECT), so the first entry
should be the one that says whether the task was solved.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.errors import ConfigError, UnknownNameError
from rlvr.verifiers.registry import build_verifier
from rlvr.verifiers.result import VerifyResult, Status

SPEC_KEYS = ("verifier", "weight", "gate", "params", "name")


@dataclass(frozen=True)
class Component:
    """One verifier inside a Composite."""

    name: str
    verifier: Any  # callable (completion, record) -> VerifyResult
    weight: float = 1.0
    gate: str | None = None


class Composite:
    """Weighted, gated sum of verifiers; itself callable like a verifier."""

    def __init__(self, components: list[Component]):
        if not components:
            raise ConfigError("a reward needs at least one component")
        names = [c.name for c in components]
        for c in components:
            if names.count(c.name) > 1:
                raise ConfigError(f"reward component name {c.name!r} is used twice; give one a 'name'")
            if c.gate is not None and (c.gate not in names or c.gate == c.name):
                others = ", ".join(n for n in names if n != c.name) or "none"
                raise ConfigError(f"reward component {c.name!r} has gate {c.gate!r}, which is not another component (have: {others})")
        self.components = list(components)
        self.name = "+".join(names)

    @property
    def component_names(self) -> list[str]:
        return [c.name for c in self.components]

    def close(self) -> None:
        """Stop what the components hold (the code verifier's sandbox and warm containers, math and vf worker
        processes); each starts again on its next use."""
        for component in self.components:
            close = getattr(component.verifier, "close", None)
            if close is not None:
                close()

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        return self._combine({c.name: c.verifier(completion, record) for c in self.components})

    def verify_batch(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]],
                     workers: int | None = None, progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
        """Each component scores the whole batch, through its own `verify_batch` when it has one
        (so a sandboxed or process-pooled verifier runs its items in parallel)."""
        per_component = {}
        for c in self.components:
            if hasattr(c.verifier, "verify_batch"):
                per_component[c.name] = c.verifier.verify_batch(completions, records, workers=workers)
            else:
                per_component[c.name] = [c.verifier(x, r) for x, r in zip(completions, records)]
        results = [self._combine({name: rs[i] for name, rs in per_component.items()}) for i in range(len(records))]
        if progress is not None:
            progress(len(results))
        return results

    def _combine(self, results: Mapping[str, VerifyResult]) -> VerifyResult:
        reward, parts = 0.0, {}
        for c in self.components:
            r = results[c.name]
            gated_off = c.gate is not None and results[c.gate].status is not Status.CORRECT
            if not gated_off:
                reward += c.weight * r.reward
            parts[c.name] = {
                "reward": r.reward, "status": r.status.value, "weight": c.weight,
                "gated_off": gated_off, "details": r.details,
            }
        first = self.components[0]
        status = results[first.name].status
        if parts[first.name]["gated_off"]:
            status = results[first.gate].status
        return VerifyResult(reward, status, {"components": parts})


def build_reward(spec: list[dict]) -> Composite:
    """A Composite from a spec list; raises ConfigError naming the entry index and the bad key."""
    if isinstance(spec, str) or not isinstance(spec, Sequence) or not spec:  # Sequence: Hydra's ListConfig too
        raise ConfigError(f"reward spec must be a non-empty list of dicts, got {spec!r}")
    return Composite([_component(i, entry) for i, entry in enumerate(spec)])


def _component(i: int, entry: Any) -> Component:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"reward entry {i} must be a dict, got {entry!r}")
    for key in entry:
        if key not in SPEC_KEYS:
            raise ConfigError(f"reward entry {i} has unknown key {key!r} (accepted: {', '.join(SPEC_KEYS)})")
    if "verifier" not in entry:
        raise ConfigError(f"reward entry {i} has no 'verifier'")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise ConfigError(f"reward entry {i}: 'weight' must be a finite number, got {weight!r}")
    params = entry.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"reward entry {i}: 'params' must be a dict, got {params!r}")
    gate = entry.get("gate")
    if gate is not None and not isinstance(gate, str):
        raise ConfigError(f"reward entry {i}: 'gate' must be a component name, got {gate!r}")
    try:
        verifier = build_verifier(entry["verifier"], **dict(params))
    except (ConfigError, UnknownNameError) as e:
        raise ConfigError(f"reward entry {i}: {e}") from e
    # a verifier may propose its component's name (`python`: its function's, as TRL names a reward function's metrics)
    name = entry.get("name", getattr(verifier, "component_name", None) or entry["verifier"])
    return Component(str(name), verifier, float(weight), gate)


def details_values(details: Mapping, key: str) -> list:
    """`details[key]` and each component's, where present: a Composite keeps its verifiers' details apart
    under `details["components"][name]["details"]` (one level: components are verifiers, not composites)."""
    own = [details[key]] if key in details else []
    return own + [p["details"][key] for p in details.get("components", {}).values() if key in p.get("details", {})]


def hacks_in(details: Mapping) -> list[str]:
    """The hack kinds a result's details name (`details["hacks"]`, its own and its components'), each once,
    in order of appearance (verifiers/code/signatures.py, verifiers/math/hedge.py)."""
    return list(dict.fromkeys(kind for kinds in details_values(details, "hacks") for kind in kinds))
