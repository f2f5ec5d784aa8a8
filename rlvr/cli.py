"""The `rlvr` command: dispatches subcommands; each subcommand's work lives in its subpackage."""

from __future__ import annotations

import sys

USAGE = """usage: rlvr <command> [overrides...]

Reinforcement learning from verifiable rewards.

commands:
  train     train a policy (Hydra overrides, e.g. algo=grpo env=arithmetic train.steps=100);
            `rlvr train --help` lists the config
  envs      list environments and verifiers, built-in and from plugins

With no overrides, `rlvr train` warm-starts a tiny model on `arithmetic` and trains it with GRPO
on the CPU. Run directories go to outputs/<date>/<time>/ unless output_dir=DIR is given.
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if argv[0] == "--version":
        from rlvr import __version__

        print(f"rlvr {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "train":
        return _train(rest)
    if command == "envs":
        return _envs(rest)
    print(f"rlvr: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def _train(overrides: list[str]) -> int:
    import hydra
    from hydra.core.config_store import ConfigStore

    from rlvr.envs.registry import env_registry
    from rlvr.trainer.config import register_schemas
    from rlvr.trainer.run import train
    from rlvr.verifiers.registry import ConfigError, UnknownNameError

    register_schemas()
    _offer_plugin_envs(ConfigStore.instance(), env_registry)

    @hydra.main(version_base="1.3", config_path="pkg://rlvr.conf", config_name="train")
    def run(cfg) -> None:
        try:
            train(cfg)
        except (ConfigError, UnknownNameError) as error:
            raise SystemExit(f"rlvr train: {error}") from None

    sys.argv = ["rlvr train", *overrides]
    run()
    return 0


def _offer_plugin_envs(store, env_registry) -> None:
    """`env=NAME` for a plugin environment that ships no YAML in rlvr.conf: a node with its name."""
    from importlib.resources import files

    shipped = {p.name.removesuffix(".yaml") for p in files("rlvr.conf").joinpath("env").iterdir()}
    for name, source in env_registry.names().items():
        if name not in shipped:
            store.store(group="env", name=name, node={"name": name}, provider=source)


def _envs(args: list[str]) -> int:
    if args:
        print(f"rlvr envs takes no arguments (got {' '.join(args)})", file=sys.stderr)
        return 2
    from rlvr.envs.registry import env_registry
    from rlvr.verifiers.registry import verifier_registry

    print("environments:")
    for name, source in sorted(env_registry.names().items()):
        try:
            env = env_registry.build(name)
            rows = getattr(env, "num_rows", None)
            detail = f"verifiers: {', '.join(env.verifier_names)}; rows: {rows if rows is not None else 'procedural'}"
        except Exception as error:  # a broken plugin is reported, not fatal to the listing
            detail = f"failed to load: {error}"
        print(f"  {name:<14} {source:<24} {detail}")
    print("verifiers:")
    for name, source in sorted(verifier_registry.names().items()):
        print(f"  {name:<14} {source}")
    return 0
