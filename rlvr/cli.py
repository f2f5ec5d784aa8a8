"""The `rlvr` command: dispatches subcommands; each subcommand's work lives in its subpackage."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USAGE = """usage: rlvr <command> [overrides...]

Reinforcement learning from verifiable rewards.

commands:
  train     train a policy (Hydra overrides, e.g. algo=grpo env=arithmetic train.steps=100);
            `rlvr train --help` lists the keys with their defaults and meaning
  eval      evaluate checkpoints on environments: 'models=[A,B]' 'envs=[arithmetic,humaneval]' n_samples=8
            temperature=1.0 output_dir=DIR -> results.json, results.md, completions.jsonl; `rlvr eval --help`
  envs      list environments and verifiers, built-in and from plugins, and installed verifiers tasksets;
            `rlvr envs new NAME [--dir D] [--multi-turn]` scaffolds a pip-installable environment plugin
  verify    score a JSONL file offline: input=IN.jsonl output=OUT.jsonl [verifier=math] [workers=N];
            exit code = number of records with status "error" (max 255)
  audit     what a reward pays for: degenerate, hostile and honest completions built from each row, scored by the
            reward training uses: env=NAME [verifier=NAME +params.K=V] audit.rows=8 -> audit.json, audit.md;
            exit 1 when an attack class is accepted or honest answers refused past the thresholds (docs/audit.md)
  sandbox   `rlvr sandbox build` builds the code sandbox's image; `rlvr sandbox doctor` checks it;
            `--hosts local,ssh://me@box2` for several Docker engines (train, eval, verify: sandbox.hosts=[...])

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
    if command in ("train", "eval", "audit"):
        from rlvr.envs.vf.env import expand_override

        rest = expand_override(rest)  # env=vf:NAME
    if command == "train":
        return _train(rest)
    if command == "eval":
        return _eval(rest)
    if command == "envs":
        from rlvr.envs.catalog import envs_command

        return envs_command(rest)
    if command == "verify":
        return _verify(rest)
    if command == "sandbox":
        return _sandbox(rest)
    if command == "audit":
        return _audit(rest)
    print(f"rlvr: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def _run_hydra(command: str, overrides: list[str], task, errors: tuple[type[BaseException], ...]) -> int:
    """Run `task(cfg)` as `rlvr COMMAND` with Hydra on rlvr.conf/COMMAND.yaml and the given overrides.

    An exception of a type in `errors` (bad input the user can fix) ends the command with a one-line
    message instead of a traceback; `task`'s return value, when an int, is the exit status.
    """
    import hydra

    if not any(o.startswith("-") for o in overrides):  # --help, --cfg job: Hydra's own flags, no run
        _check_overrides(command, [o for o in overrides if not o.lstrip("+~").startswith("hydra")])
    code = 0

    @hydra.main(version_base="1.3", config_path="pkg://rlvr.conf", config_name=command)
    def run(cfg) -> None:
        nonlocal code
        try:
            code = task(cfg) or 0
        except errors as error:
            raise SystemExit(f"rlvr {command}: {error}") from None

    sys.argv = [f"rlvr {command}", *overrides]
    run()
    return code


@contextmanager
def _one_line_refusal(command: str) -> Iterator[None]:
    """A ConfigError from the command's own checks ends it with one line, `rlvr COMMAND: ...`."""
    from rlvr.errors import ConfigError

    try:
        yield
    except ConfigError as error:
        raise SystemExit(f"rlvr {command}: {error}") from None


def _wants_help(args: list[str]) -> bool:
    return "--help" in args or "-h" in args


def _help(command: str, args: list[str]) -> int:
    """`rlvr COMMAND --help [all|TOPIC ...] [overrides ...]`: the keys grouped, each with its default and meaning
    (rlvr/help.py), under the given overrides. Hydra's own help stays at `--hydra-help`."""
    from rlvr.help import help_text

    _check_overrides(command, [a for a in args if "=" in a and not a.startswith("-")])
    try:
        print(help_text(command, [a for a in args if a not in ("--help", "-h")]), end="")
    except ValueError as error:
        print(f"rlvr {command}: {error}", file=sys.stderr)
        return 2
    return 0


def _check_overrides(command: str, overrides: list[str]) -> None:
    """Compose `command`'s config with `overrides` once before Hydra runs it, so that a misspelt key, a value of
    the wrong type or an unknown group option ends in one line naming the override (with the nearest key, or
    the options), not Hydra's block that suggests `+key=` (which would add the typo as a new key)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
            compose(config_name=command, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as error:
        raise SystemExit(f"rlvr {command}: {_one_line(command, overrides, error)}") from None


def _one_line(command: str, overrides: list[str], error: BaseException) -> str:
    """What a composition error says, in one line: the override, what is wrong with it, what would be right."""
    import difflib

    from hydra import compose, initialize_config_module

    cause = error.__cause__
    key = getattr(cause, "full_key", None)
    override = next((o for o in overrides if key and o.lstrip("+~").split("=", 1)[0] == key), key)
    first = str(cause or error).strip().splitlines()[0]
    if key and type(cause).__name__ == "ConfigAttributeError":  # a key that is not in its section
        section, _, name = key.rpartition(".")
        groups = [o for o in overrides if "=" in o and "." not in o.split("=", 1)[0] and o != override]  # env=...
        try:
            with initialize_config_module(config_module="rlvr.conf", version_base="1.3"):
                parent = compose(config_name=command, overrides=groups)
            for part in section.split(".") if section else []:
                parent = parent[part]
            near = difflib.get_close_matches(name, [str(k) for k in parent], n=1)
        except Exception:  # no suggestion is better than a second error
            near = []
        hint = f"; did you mean {section + '.' if section else ''}{near[0]}?" if near else ""
        return (f"{override}: {section or 'the config'} has no key {name!r}{hint} "
                f"(rlvr {command} --help all lists every key)")
    if key:
        return f"{override}: {first}"
    if type(error).__name__ == "MissingConfigException":  # an unknown option of a group: list the options
        lines = [line.strip() for line in str(error).splitlines()]
        options = [line for line in lines[lines.index("") + 2:] if line and not line.startswith(("Config", "provider"))] \
            if "" in lines else []
        return f"{lines[0]}" + (f" (options: {', '.join(options)})" if options else "")
    return first


def _train(overrides: list[str]) -> int:
    from hydra.core.config_store import ConfigStore

    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry
    from rlvr.trainer.algo_keys import refuse_foreign_overrides
    from rlvr.trainer.config import refuse_renamed_keys, register_schemas
    from rlvr.trainer.resume_config import resumed_algo_override
    from rlvr.trainer.run_dir import settle_run_dir
    from rlvr.errors import ConfigError, UnknownNameError

    register_schemas()
    offer_plugin_envs(ConfigStore.instance(), env_registry)
    if _wants_help(overrides):
        return _help("train", overrides)
    with _one_line_refusal("train"):  # before Hydra creates the run directory or says it in several lines
        overrides = settle_run_dir(overrides)  # resume=DIR trains there; an output_dir holding a run is refused
        overrides, resumed_algo = resumed_algo_override(overrides)  # resume=DIR: the run's algorithm
        refuse_renamed_keys(overrides)  # an old key name
        refuse_foreign_overrides(overrides)  # another family's algo.KEY

    def task(cfg) -> None:
        from hydra.core.hydra_config import HydraConfig

        from rlvr.trainer.run import train  # torch loads here, so `rlvr train --help` stays fast
        from rlvr.trainer.run_dir import log_stop, stop_line, stop_on_sigterm, tee_log

        if cfg.resume:  # the saved run's config.yaml, with this command line's overrides on top
            from rlvr.trainer.resume_config import resumed_config

            cfg = resumed_config(cfg, [o for o in HydraConfig.get().overrides.task if o != resumed_algo])
        log_path = Path(cfg.resume or cfg.output_dir) / "train.log"
        try:
            with stop_on_sigterm():  # a preempted job says where its last checkpoint is, as Ctrl-C does
                train(cfg, log=tee_log(log_path))
        except (Exception, KeyboardInterrupt) as error:  # train.log ends with why, as the console does
            line = stop_line(cfg, error, sys.exc_info()[2])
            log_stop(log_path, line)
            if isinstance(error, KeyboardInterrupt):  # Ctrl-C, or SIGTERM's Terminated: two lines, no traceback
                raise SystemExit(line) from None
            raise

    return _run_hydra("train", overrides, task, (ConfigError, UnknownNameError))


def _eval(overrides: list[str]) -> int:
    from hydra.core.config_store import ConfigStore

    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry
    from rlvr.trainer.config import refuse_renamed_keys
    from rlvr.trainer.evaluation.eval_config import register_eval_schema
    from rlvr.errors import ConfigError, UnknownNameError

    register_eval_schema()
    offer_plugin_envs(ConfigStore.instance(), env_registry)
    if _wants_help(overrides):
        return _help("eval", overrides)
    with _one_line_refusal("eval"):  # an old key name: one line here, before Hydra's several
        refuse_renamed_keys(overrides)

    def task(cfg) -> None:
        from rlvr.trainer.evaluation.eval_run import run_eval  # torch loads here, so `rlvr eval --help` stays fast

        try:  # the overrides say what the command line sets over a run's config (evaluation/run_config.py)
            run_eval(cfg, overrides=[o for o in overrides if not o.lstrip("+~").startswith(("hydra", "-"))])
        except BaseException:
            _remove_unused_eval_dir(Path(cfg.output_dir))
            raise

    return _run_hydra("eval", overrides, task, (ConfigError, UnknownNameError))


def _remove_unused_eval_dir(out: Path) -> None:
    """After a failed `rlvr eval`: the output directory goes when it holds nothing an eval did (Hydra's eval.log,
    the settings, an empty completions file; a resume needs none of them), and so does the date folder of the
    default outputs/eval/<date>/<time>/ and the empty folders above it. Completions already written stay."""
    from rlvr.trainer.evaluation.eval_run import COMPLETIONS, SETTINGS

    completions = out / COMPLETIONS
    if not out.is_dir() or (completions.is_file() and completions.stat().st_size > 0):
        return
    for name in ("eval.log", SETTINGS, COMPLETIONS):
        (out / name).unlink(missing_ok=True)
    default = out.parent.parent.name == "eval"  # outputs/eval/<date>/<time>: the folders above are this command's
    for folder in (out / "servers", out, *((out.parent, out.parent.parent, out.parent.parent.parent) if default else ())):
        if not folder.is_dir():
            continue
        if any(folder.iterdir()):
            break
        folder.rmdir()


def _verify(overrides: list[str]) -> int:
    from omegaconf import OmegaConf

    from rlvr.sandboxes.hosts import apply_hosts
    from rlvr.verifiers.batch import exit_code, format_summary, register_schema, verify_file
    from rlvr.errors import ConfigError

    register_schema()
    if _wants_help(overrides):
        return _help("verify", overrides)

    def task(cfg) -> int:
        missing = [key for key in ("input", "output") if not cfg[key]]
        if missing:
            raise ConfigError(f"{' and '.join(f'{k}=' for k in missing)} missing: rlvr verify input=IN.jsonl "
                              f"output=OUT.jsonl [verifier=math] (record format: rlvr verify --help)")
        if Path(cfg.output).resolve() == Path(cfg.input).resolve():
            raise ConfigError(f"output={cfg.output} is the input file: rlvr verify writes its records to a new file "
                              f"and leaves the input as it is; choose another output=")
        apply_hosts(cfg.sandbox.hosts)
        summary = verify_file(cfg.input, cfg.output, verifier_name=cfg.verifier, workers=cfg.workers,
                              verifier_params=OmegaConf.to_container(cfg.params, resolve=True))
        print(format_summary(summary))
        return exit_code(summary)

    return _run_hydra("verify", overrides, task, (OSError, ConfigError))


def _audit(overrides: list[str]) -> int:
    from hydra.core.config_store import ConfigStore

    from rlvr.envs.catalog import offer_plugin_envs
    from rlvr.envs.registry import env_registry
    from rlvr.trainer.audit.config import register_audit_schema
    from rlvr.errors import ConfigError, UnknownNameError

    register_audit_schema()
    offer_plugin_envs(ConfigStore.instance(), env_registry)

    def task(cfg) -> int:
        from rlvr.trainer.audit.run import run_audit  # torch loads here

        return run_audit(cfg)

    return _run_hydra("audit", overrides, task, (ConfigError, UnknownNameError))


def _sandbox(args: list[str]) -> int:
    from rlvr.sandboxes.command import sandbox_command
    from rlvr.verifiers.code.verifier import probe_rows

    return sandbox_command(args, extra_rows=probe_rows)  # the doctor's table also shows the code verifier's probes
