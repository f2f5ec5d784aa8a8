"""What environments there are, as a user meets them: the `rlvr envs` listing (built-in and plugin environments
and verifiers, and the installed `verifiers` tasksets usable as env=vf:NAME), and the Hydra nodes that let
`env=NAME` choose a plugin environment which ships no YAML (`offer_plugin_envs`, run by `rlvr train` and
`rlvr eval` before they compose)."""

from __future__ import annotations

import sys


def offer_plugin_envs(store, env_registry) -> None:
    """`env=NAME` for a plugin environment that ships no YAML in rlvr.conf: a node with its name and each
    parameter its factory gives a plain default, so `--help` lists them and `env.KEY=VALUE` needs no `+`."""
    from importlib.resources import files

    shipped = {p.name.removesuffix(".yaml") for p in files("rlvr.conf").joinpath("env").iterdir()}
    for name, source in env_registry.names().items():
        if name not in shipped:
            store.store(group="env", name=name, node={"name": name, **_plain_defaults(env_registry, name)},
                        provider=source)


def _plain_defaults(registry, name: str) -> dict:
    """The factory's keyword parameters with a YAML-able default (a broken plugin: none; `rlvr envs` reports it)."""
    import inspect

    try:
        parameters = inspect.signature(registry.get(name)).parameters.values()
    except Exception:  # noqa: BLE001 - building the env names the problem; the listing must not stop here
        return {}

    def plain(value) -> bool:
        if isinstance(value, (list, tuple)):
            return all(plain(v) for v in value)
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        return value is None or isinstance(value, (str, int, float, bool))

    return {p.name: list(p.default) if isinstance(p.default, tuple) else p.default for p in parameters
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is not p.empty and plain(p.default)}


def envs_command(args: list[str]) -> int:
    """`rlvr envs` (the listing) and `rlvr envs new NAME ...` (envs/scaffold.py)."""
    if args and args[0] == "new":
        from rlvr.envs.scaffold import main as scaffold_main

        return scaffold_main(args[1:])
    if args:
        print(f"rlvr envs takes no arguments but `new NAME [--dir D] [--multi-turn]` (got {' '.join(args)})",
              file=sys.stderr)
        return 2
    from rlvr.envs.registry import env_registry
    from rlvr.errors import ConfigError
    from rlvr.verifiers.registry import verifier_registry

    print("environments:")
    for name, source in _listed(env_registry):
        try:
            env = env_registry.build(name)
            rows = getattr(env, "num_rows", None)
            if rows is None:
                rows = "procedural" if getattr(env, "procedural", True) else f"data ({env.data_source})"
            detail = f"verifiers: {', '.join(env.verifier_names)}; rows: {rows}"
        except ConfigError as error:  # its defaults are not enough (env=vf:NAME): what it needs, not a failure
            detail = f"needs settings: {error}"
        except Exception as error:  # a broken plugin is reported, not fatal to the listing
            detail = f"failed to load: {type(error).__name__}: {error}"
        print(f"  {name:<14} {source:<24} {detail}")
    print("verifiers:")
    for name, source in _listed(verifier_registry):
        detail = ""
        if source.startswith("plugin"):
            try:
                verifier_registry.get(name)
            except Exception as error:
                detail = f"failed to load: {type(error).__name__}: {error}"
        print(f"  {name:<14} {source:<24} {detail}".rstrip())
    list_vf_tasksets()
    return 0


def list_vf_tasksets() -> None:
    """`rlvr envs`' last part: the installed `verifiers` taskset packages, each usable as env=vf:NAME."""
    from rlvr.envs.vf.catalog import INSTALL_HINT, bundled_tasksets, installed_tasksets, verifiers_version

    version = verifiers_version()
    if version is None:
        print(f"verifiers tasksets (env=vf:NAME): the verifiers package is not installed: {INSTALL_HINT}")
        return
    print(f"verifiers tasksets (env=vf:NAME; verifiers {version}):")
    tasksets = installed_tasksets()
    for taskset in tasksets:
        detail = f"{taskset.kind}: rlvr train env=vf:{taskset.name}" if taskset.kind else \
            f"failed to load: {taskset.problem}"
        print(f"  {taskset.name:<14} {taskset.distribution:<24} {detail}")
    if not tasksets:
        print("  none installed: pip install a taskset package, then env=vf:ITS_IMPORT_NAME")
    bundled = bundled_tasksets()
    if bundled:
        print(f"  bundled in verifiers (adapters to other frameworks, not checked here): {', '.join(bundled)}")


def _listed(registry) -> list[tuple[str, str]]:
    """(name, source) pairs; plugins that clash in name are reported as one line instead of ending the listing."""
    try:
        return sorted(registry.names().items())
    except Exception as error:
        print(f"  (plugins not listed: {type(error).__name__}: {error})")
        registry._load_builtins()
        return sorted((name, "built-in") for name in registry._factories)
