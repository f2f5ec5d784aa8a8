"""Name -> factory lookup, with entry-point plugins: one `Registry` for verifiers, one for environments.

In-tree code registers with a decorator; installed packages declare an entry point in the
registry's group (`rlvr.verifiers` or `rlvr.envs`) whose value is the factory. Built-in modules
are imported and plugins loaded only when first needed, so `import rlvr.verifiers` stays cheap
and a broken plugin only breaks the name that uses it. Config is checked against the factory's
signature before the call, so a typo fails with the field's name instead of a bare TypeError.

It sits at the bottom of the layers, beside rlvr/errors.py: verifiers/registry.py holds the verifiers' registry
and envs/registry.py the environments', and neither layer borrows the other's module for it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points  # module-level name so tests can monkeypatch it here
from typing import Any

from rlvr.errors import ConfigError, UnknownNameError

BUILTIN = "built-in"


class Registry:
    """Factories by name for one `kind` ("verifier", "env"), plus plugins from entry-point `group`."""

    def __init__(self, kind: str, group: str, builtin_modules: tuple[str, ...]):
        self.kind = kind
        self.group = group
        self.builtin_modules = tuple(builtin_modules)
        self._factories: dict[str, Callable[..., Any]] = {}
        self._plugin_factories: dict[str, Callable[..., Any]] = {}  # entry points already loaded
        self._builtins_loaded = False

    def register(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register a class or function, called later with the config as keywords."""

        def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._factories and self._factories[name] is not factory:
                raise ValueError(f"{self.kind} {name!r} is already registered (by {self._factories[name]!r})")
            self._factories[name] = factory
            return factory

        return decorate

    def names(self) -> dict[str, str]:
        """Every available name -> its source: "built-in" or "plugin <distribution name>"."""
        self._load_builtins()
        found = {name: BUILTIN for name in self._factories}
        for name, ep in self._plugin_entry_points().items():
            found[name] = f"plugin {_distribution_name(ep)}"
        return dict(sorted(found.items()))

    def get(self, name: str) -> Callable[..., Any]:
        """The factory for `name`; a plugin's entry point is loaded here, on first request."""
        self._load_builtins()
        if name in self._factories:
            return self._factories[name]
        if name in self._plugin_factories:
            return self._plugin_factories[name]
        plugins = self._plugin_entry_points()
        if name not in plugins:
            available = ", ".join(sorted(set(self._factories) | set(plugins))) or "(none)"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; available: {available}")
        factory = plugins[name].load()
        if not callable(factory):
            raise TypeError(
                f"{self.kind} plugin {name!r} from {_distribution_name(plugins[name])} "
                f"points at {factory!r}, which is not callable"
            )
        self._plugin_factories[name] = factory
        return factory

    def build(self, name: str, **config: Any) -> Any:
        """Check `config` against the factory's signature, then call the factory with it."""
        factory = self.get(name)
        check_config(factory, config, what=f"{self.kind} {name!r}")
        return factory(**config)

    def _load_builtins(self) -> None:
        if self._builtins_loaded:
            return
        for module in self.builtin_modules:
            importlib.import_module(module)  # registers through the decorator
        self._builtins_loaded = True

    def _plugin_entry_points(self) -> dict[str, Any]:
        """Entry points of this group by name; one reusing a built-in or another plugin's name is refused."""
        plugins: dict[str, Any] = {}
        for ep in entry_points(group=self.group):
            if _distribution_name(ep) == "rlvr":
                continue  # rlvr's own entry points only repeat its built-ins
            if ep.name in self._factories:
                raise ValueError(
                    f"{self.kind} plugin {ep.name!r} from {_distribution_name(ep)} reuses a built-in name; "
                    f"rename its entry point in group {self.group!r}"
                )
            if ep.name in plugins and _distribution_name(plugins[ep.name]) != _distribution_name(ep):
                raise ValueError(
                    f"{self.kind} {ep.name!r} is provided by two plugins: "
                    f"{_distribution_name(plugins[ep.name])} and {_distribution_name(ep)}"
                )
            plugins[ep.name] = ep
        return plugins


def check_config(factory: Callable[..., Any], config: dict[str, Any], what: str) -> None:
    """Raise ConfigError for a keyword `factory` does not accept or a required one that is missing."""
    params = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return  # it accepts anything; the factory validates its own config
    accepted = [
        n for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    for key in config:
        if key not in accepted:
            raise ConfigError(f"{what} has no parameter {key!r} (accepted: {', '.join(accepted) or 'none'})")
    for n in accepted:
        if params[n].default is inspect.Parameter.empty and n not in config:
            raise ConfigError(f"{what} needs parameter {n!r}")


def _distribution_name(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "<unknown distribution>"
