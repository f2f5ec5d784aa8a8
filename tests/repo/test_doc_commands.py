"""Every `rlvr train|eval|verify` command in the README and docs/ (every page of the site) is one the command
accepts, as written.

Each command is split into words by bash itself (quotes, brace expansion, globbing and comments as a user's
shell treats them: an unquoted `{a,b}` becomes two words there, and so here), then composed with the command's
own checks: `rlvr.api.train_config` for `rlvr train` (misspelt keys, bad types, renamed keys, another
algorithm family's keys, then validation), the eval schema for `rlvr eval`, the verify schema for `rlvr verify`.
Placeholders (`DIR`, `RUN_DIR`, `ENV`, `N`...) are replaced by values of their kind first. What this does not
do is run them: a command that composes can still fail at its first step (data it cannot find, a test split
too small). tests/rlvr/test_api.py runs the README's Python example as written. The multi-turn quick start
(`rlvr train env=guess_number rollout=hf train.steps=10`) is not run by any test; its parts are:
tests/trainer/test_guess_number_warm_start.py checks that its warm start's transcripts are games the environment plays
out, and tests/trainer/experience/test_multi_turn_envs.py runs one training step on a guess_number environment.

A command is skipped only for a reason listed in SKIPPED (a plugin that is not installed here, a run
directory that must exist), and a skip that no longer matches a command fails, so the list cannot rot.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from rlvr.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
COMMAND = re.compile(r"^(?:\$ )?(?:python -m )?rlvr (train|eval|verify)\b(.*)$")

# placeholder word -> a value of its kind (whole words only, after `=` or `[`/`,` inside a list)
PLACEHOLDERS = {
    "DIR": "{tmp}", "DIR_OR_HUB_NAME": "{tmp}", "ENV": "arithmetic",
    "N": "4", "P": "2", "G": "4", "T": "16", "IN.jsonl": "in.jsonl", "OUT.jsonl": "out.jsonl",
}
# a substring of the command -> why it cannot be composed here
SKIPPED = {
    "resume=RUN_DIR": "resume= reads an existing run's config.yaml (tests/trainer/test_resume.py)",
    "env=my_task": "the plugin walkthrough's package is not installed here (tests/rlvr/test_plugin_roundtrip.py)",
    "data=scored/completions.jsonl": "reads what the `rlvr eval` line before it writes (tests/trainer/algos/test_dpo_train.py)",
    "data=examples.jsonl": "a user's own SFT rows, not on this machine (tests/trainer/algos/test_sft_train.py reads such a file)",
    "[overrides...]": "a usage line, not a command",
    "rlvr train ...": "a usage line, not a command",
    "rlvr eval ...": "a usage line, not a command",
    "[verifier=math]": "a usage line, not a command",
    "--help": "the help's own tests (tests/rlvr/test_help.py)",
    "/models/qwen2.5-0.5b-instruct-q8_0.gguf": "a user's own GGUF file, not on this machine",
}


def doc_commands() -> list[tuple[str, str]]:
    """(where, command line) for every rlvr train|eval|verify line in a shell block, continuations joined."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for block in FENCE.finditer(text):
            if block.group(1) not in ("", "bash", "console", "sh", "shell"):
                continue
            first = text[:block.start()].count("\n") + 2
            lines = block.group(2).split("\n")
            i = 0
            while i < len(lines):
                start, line = i, lines[i].strip()
                while line.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line[:-1] + " " + lines[i].strip()
                i += 1
                if COMMAND.match(line):
                    found.append((f"{path.relative_to(ROOT)}:{first + start}", line))
    return found


def shell_words(line: str, cwd: Path) -> tuple[str, list[str]]:
    """The subcommand and its arguments as bash would pass them (run in an empty folder, so no glob matches)."""
    command, rest = COMMAND.match(line).groups()
    done = subprocess.run(["bash", "--norc", "-c", f"words() {{ printf '%s\\0' \"$@\"; }}; words {rest}"],
                          cwd=cwd, capture_output=True, text=True, check=True)
    words = [w for w in done.stdout.split("\0") if w]
    return command, [_fill(w, cwd) for w in words]


def _fill(word: str, folder: Path) -> str:
    key, eq, value = word.partition("=")
    if eq and value in PLACEHOLDERS:
        return f"{key}={PLACEHOLDERS[value].format(tmp=folder)}"  # a path placeholder: an existing folder
    return word


def compose(command: str, args: list[str], tmp_path: Path) -> None:
    """Raise what the command would say before it starts work."""
    if command == "train":
        from rlvr.api import train_config
        from rlvr.trainer.validate import validate_train_config

        validate_train_config(train_config([*args, f"hydra.run.dir={tmp_path}"]))
    elif command == "eval":
        from hydra.core.config_store import ConfigStore

        from rlvr.cli import _check_overrides
        from rlvr.envs.catalog import offer_plugin_envs
        from rlvr.envs.registry import env_registry
        from rlvr.envs.vf.env import expand_override
        from rlvr.trainer.evaluation.eval_config import compose_eval_config, register_eval_schema

        args = expand_override(args)  # env=vf:NAME, as `rlvr` does for every command
        register_eval_schema()
        offer_plugin_envs(ConfigStore.instance(), env_registry)
        _check_overrides("eval", args)
        compose_eval_config(args)
    else:
        from rlvr.cli import _check_overrides
        from rlvr.verifiers.batch import register_schema

        register_schema()
        _check_overrides("verify", args)


COMMANDS = doc_commands()


def test_the_docs_hold_commands_and_every_skip_still_matches_one():
    assert len(COMMANDS) >= 30, COMMANDS  # the parser still finds the README's commands
    lines = [line for _, line in COMMANDS]
    stale = [key for key in SKIPPED if not any(key in line for line in lines)]
    assert not stale, f"SKIPPED entries that match no command any more: {stale}"


@pytest.mark.parametrize("where,line", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_is_accepted_as_written(where, line, tmp_path):
    reason = next((why for key, why in SKIPPED.items() if key in line), None)
    if reason:
        pytest.skip(reason)
    command, args = shell_words(line, tmp_path)
    try:
        compose(command, args, tmp_path)
    except SystemExit as error:  # the command's one-line refusal
        pytest.fail(f"{where}: `{line}` is refused: {error.code}")
    except (ConfigError, UnknownNameError) as error:
        pytest.fail(f"{where}: `{line}` is refused: {error}")


def test_an_unquoted_brace_list_is_what_bash_makes_of_it(tmp_path):
    """The check reads words as bash does: `{a,b}` unquoted is brace-expanded into two words."""
    assert shell_words("rlvr train env.reference={a,b}", tmp_path) == ("train", ["env.reference=a", "env.reference=b"])
    assert shell_words("rlvr train 'env.reference={a,b}'  # a comment", tmp_path) == ("train", ["env.reference={a,b}"])
