"""The installed `verifiers` taskset packages that `env=vf:NAME` can train on, for `rlvr envs`.

verifiers keeps no registry of them: a taskset is a package found by its import name that exports its
`Taskset` subclass in `__all__` (verifiers' utils/loaders.py `taskset_class`), multi-turn when it also exports
an `Env` subclass (envs/vf/multi_turn.py). So the candidates are the modules of the installed distributions
that require `verifiers` (as the packages `vf-init` scaffolds do), each imported and asked through verifiers'
own loader. Importing verifiers.v1 takes seconds: nothing is imported unless such a distribution is installed.
The adapters bundled inside verifiers (verifiers/v1/tasksets/: harbor, textarena, ...) are named, not imported.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pkgutil
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "pip install 'rlvr[vf]', then a verifiers taskset package"


@dataclass(frozen=True)
class Taskset:
    name: str  # the import name: env=vf:NAME
    distribution: str
    kind: str  # single-turn | multi-turn | "" when it could not be loaded
    problem: str = ""  # why it could not be loaded


def verifiers_version() -> str | None:
    """The installed `verifiers` distribution's version, or None when it is not installed."""
    try:
        return importlib.metadata.version("verifiers")
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_tasksets() -> list[Taskset]:
    """Each top-level module of a distribution that requires `verifiers`, as a taskset or with its problem."""
    found = []
    for module, distribution in sorted(_candidates()):
        try:
            from verifiers.v1.utils.loaders import environment_class, taskset_class
            from verifiers.v1.envs.single_agent import SingleAgentEnv

            taskset_class(module)
        except TypeError:  # it exports no Taskset: a library that uses verifiers, not a taskset
            continue
        except Exception as error:  # noqa: BLE001 - a broken package is reported, not fatal to the listing
            found.append(Taskset(module, distribution, "", f"{type(error).__name__}: {error}"))
            continue
        try:
            multi = environment_class(module) is not SingleAgentEnv
        except Exception as error:  # noqa: BLE001 - two Env subclasses exported: verifiers' own message
            found.append(Taskset(module, distribution, "", f"{type(error).__name__}: {error}"))
            continue
        found.append(Taskset(module, distribution, "multi-turn" if multi else "single-turn"))
    return found


def bundled_tasksets() -> list[str]:
    """The taskset adapters that ship inside verifiers (verifiers/v1/tasksets/), by name, without importing them."""
    spec = importlib.util.find_spec("verifiers")
    if spec is None or not spec.submodule_search_locations:
        return []
    folders = [str(Path(p) / "v1" / "tasksets") for p in spec.submodule_search_locations]
    return sorted(m.name for m in pkgutil.iter_modules(folders) if m.ispkg)


def _candidates() -> set[tuple[str, str]]:
    """(top-level module, distribution name) of every installed distribution that requires `verifiers` outright
    (not only under an extra, as rlvr's own `vf` extra does)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    modules: dict[str, list[str]] = {}
    for module, names in importlib.metadata.packages_distributions().items():
        for name in names:
            modules.setdefault(canonicalize_name(name), []).append(module)
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name or canonicalize_name(name) == "verifiers":
            continue
        for line in dist.requires or []:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if canonicalize_name(requirement.name) == "verifiers" \
                    and (requirement.marker is None or requirement.marker.evaluate({"extra": ""})):
                found |= {(m, name) for m in modules.get(canonicalize_name(name), []) if not m.startswith("_")}
                break
    return found
