"""Programs that read stdin and write stdout (MBPP/Codeforces style), scored by running their tests.

Data: local JSONL/Parquet with one problem a row: the statement (field `statement`; set
`statement_field`, e.g. "description" for Codeforces dumps) and the tests (field `tests`: a list
of `{"stdin": ..., "stdout": ...}`, or `{"input": ..., "output": ...}` as Codeforces dumps have
them; a JSON string of that list is accepted too, as Parquet files often store it). An optional
`solution` field becomes the row's reference completion. A row whose tests are malformed stops
the load with its row number.

Reward: the `code` verifier with the row's stdio tests, run in the Docker sandbox by default
(`backend=local` runs the code unsandboxed on this machine: only for trusted code). The reward is
the fraction of tests passed; the status is correct only when all pass.

Held-back tests: `hidden_tests=k` keeps each problem's last k cases (at most all but one) out of the
prompt, which then lists the shown cases as examples; the reward uses all of them (`hidden_reward=both`, the
default: a program that only looks up the shown examples' outputs earns no more than its share of them) or the
shown ones alone (`shown`, to measure the gap without paying for it), and every step logs `tests/shown_pass`, `tests/hidden_pass`
and `hack/hidden_gap` (verifiers/code/verifier.py); `rlvr eval` reports `shown_pass`, `hidden_pass` and `hidden_gap`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rlvr.envs.data import DataEnv, RowError, check_template, stable_id
from rlvr.envs.registry import register_env
from rlvr.sandboxes.factory import BACKENDS
from rlvr.errors import ConfigError

DEFAULT_TEMPLATE = (
    "{statement}\n\nWrite a Python 3 program that reads from standard input and writes to standard output. "
    "Reply with the program in a ```python code block."
)


def stdio_cases(tests: Any) -> list[dict[str, str]]:
    """A row's tests as code-verifier stdio cases; RowError saying what is wrong."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as error:
            raise RowError(f"'tests' is a string but not JSON: {error}") from None
    if isinstance(tests, dict) and "cases" in tests:
        tests = tests["cases"]
    if not isinstance(tests, list) or not tests:
        raise RowError("'tests' must be a non-empty list of {stdin, stdout} objects")
    cases = []
    for i, case in enumerate(tests):
        if not isinstance(case, dict):
            raise RowError(f"test {i} must be an object with stdin and stdout")
        stdin = case.get("stdin", case.get("input", ""))
        stdout = case.get("stdout", case.get("output"))
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise RowError(f"test {i} needs string 'stdout' (or 'output') and optional string 'stdin' (or 'input')")
        cases.append({"stdin": stdin, "stdout": stdout})
    return cases


@register_env("code_stdio")
class CodeStdioEnv(DataEnv):
    """Write a program for a problem statement; reward = the fraction of its stdin/stdout tests passed."""

    name: ClassVar[str] = "code_stdio"
    # a whole program in a code block
    default_max_new_tokens: ClassVar[int] = 1024
    truncated_reward: ClassVar[str] = "zero"

    def __init__(self, *, train_file: str | None = None, test_file: str | None = None, hub: str | None = None,
                 hub_config: str | None = None, statement_field: str = "statement", tests_field: str = "tests",
                 backend: str = "docker", prompt_template: str = DEFAULT_TEMPLATE,
                 reward: list[dict] | None = None, system_prompt: str | None = None, hidden_tests: int = 0,
                 hidden_reward: str = "both"):
        if isinstance(hidden_tests, bool) or not isinstance(hidden_tests, int) or hidden_tests < 0:
            raise ConfigError(f"code_stdio: 'hidden_tests' must be an int >= 0, got {hidden_tests!r}")
        self.hidden_tests = hidden_tests
        self.prompt_template = check_template("code_stdio", prompt_template, statement="Print 1.")
        for key, value in (("statement_field", statement_field), ("tests_field", tests_field)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"code_stdio: {key!r} must be a field name, got {value!r}")
        if backend not in BACKENDS:
            raise ConfigError(f"code_stdio: 'backend' must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.statement_field, self.tests_field = statement_field, tests_field
        self.required_fields = (statement_field, tests_field)
        if reward is None:
            reward = [{"verifier": "code", "params": {"backend": backend, "hidden_reward": hidden_reward}}]
        elif hidden_reward != "both":
            raise ConfigError("code_stdio: 'hidden_reward' applies to the default reward; with env.reward, "
                              "set the code verifier's params.hidden_reward instead")
        super().__init__(train_file=train_file, test_file=test_file, hub=hub, hub_config=hub_config,
                         reward=reward, system_prompt=system_prompt)

    def _row(self, raw: dict[str, Any]) -> dict[str, Any]:
        statement = str(raw[self.statement_field])
        cases = stdio_cases(raw[self.tests_field])
        solution = raw.get("solution")
        held = min(self.hidden_tests, len(cases) - 1)  # at least one case stays shown
        shown, hidden = cases[:len(cases) - held], cases[len(cases) - held:]
        prompt = self.prompt_template.format(statement=statement)
        if held:
            prompt += "\n\n" + "\n\n".join(f"Example input:\n{c['stdin']}\nExample output:\n{c['stdout']}"
                                           for c in shown)
        return {
            "id": stable_id("code_stdio", statement),
            "messages": [{"role": "user", "content": prompt}],
            "answer": solution or "",
            "reference": f"```python\n{solution}\n```" if solution else "",
            "tests": {"kind": "stdio", "cases": shown},
            **({"hidden_tests": {"kind": "stdio", "cases": hidden}} if held else {}),
        }
