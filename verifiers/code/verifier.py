"""Code reward: run the completion's code against the record's tests in a sandbox.

The code is the last fenced block of the completion (an unclosed last fence counts up to the end
of the text), or the whole completion when it has no fence. `record["tests"]` is one of
three kinds (docs/verify.md):
    {"kind": "stdio",  "cases": [{"stdin": "1 2\\n", "stdout": "3\\n"}], "float_tol": 1e-6?}
    {"kind": "assert", "prefix": "def f(x):\\n", "code": "def check(c): ...", "entry_point": "f"}
    {"kind": "call",   "fn": "add", "cases": [{"args": [1, 2], "expected": 3}], "float_tol": 1e-6?}
`stdio` runs the program once per case and compares whitespace-separated tokens on the host
(with `float_tol`, numeric tokens as numbers: an integer expected exactly, a float within the
tolerance). `assert` runs prefix + code, then the test code, then
`check(entry_point)`, in one run (HumanEval style; when prefix + code is not valid Python, e.g.
a bare signature followed by a whole function, the code alone). `call` calls `fn(*args)` per case in one
run and compares the results on the host, as Python compares their JSON form with the expected value
(a tuple or named tuple is a list, a Counter a dict, numbers exactly unless a float is expected and
`float_tol` given: compare.values_equal). In both, the tests run in a checker process
under another user than the model's code, which it calls through a strict serialiser; how a
pass is established, and why a program cannot fake one, is in harness.py.

Reward: the fraction of tests passed (`reward="fraction"`) or 1/0 (`"binary"`); with
`stop_at_first_failure`, tests after the first failure are not run (stdio) or not counted.
Status: correct (all passed), incorrect (a test failed), runtime_error (syntax error, crash,
exception in the code, nonzero exit, or the program ended before the tests reported),
timeout, memory_limit, output_limit, unparsable (no code), error (bad record, a sandbox
failure, or an exception while judging it on the host; the message says which). An error is that
record's alone: the batch's other records keep their verdicts. If the sandbox cannot start at all (no
engine, no image), SandboxUnavailable is raised instead of scoring every completion 0.

Where it runs: `backend="docker"` on the engines of RLVR_SANDBOX_HOSTS (what a command's `sandbox.hosts`
exports; default the local engine), `workers` containers on each (rlvr.sandboxes.hosts, fleet.py).

Held-back tests: a record may carry `hidden_tests` (more `stdio` or `call` cases of the tests' kind, which
the prompt does not show); the reward comes from both (`hidden_reward="both"`, the default: a program that
only looks up the shown cases' outputs earns their share, no more) or from `tests` alone (`"shown"`, to
measure the gap without paying for it), and details hold `shown_pass`, `hidden_pass` and `hidden_gap`. Not done for `assert` tests.

Identical completions in one batch (same code, same tests) run once by default (`dedupe`); the copies carry
`details["same_as"]`, the index of the one that ran.

`details["hacks"]` (only when any): the hack signatures of an `assert`/`call` run, with the harness's
`details["observed"]` notes; kinds and who observes each in signatures.py.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from rlvr.sandboxes.base import Checker, ExecStatus, Execution, Limits, MiB
from rlvr.sandboxes.factory import BACKENDS, get_sandbox
from rlvr.sandboxes.hosts import SandboxUnavailable
from rlvr.verifiers.code.cheats import CHEATS
from rlvr.verifiers.code.signatures import code_hacks
from rlvr.verifiers.code.harness import (
    CANDIDATE,
    CHECKER,
    candidate_input,
    checker_input,
    parse_report,
    read_result,
)
from rlvr.verifiers.code.compare import stdout_matches, values_equal
from rlvr.verifiers.code.wire import WireError, wire_encode
from rlvr.errors import ConfigError
from rlvr.verifiers.registry import register_verifier
from rlvr.verifiers.result import Status, VerifyResult

# The info string's language word, matched only inside one fence line; both parts may be empty, so it never backtracks.
_FENCE_LANG = re.compile(r"[ \t]*([\w+#.-]*)")
LIMIT_STATUS = {
    ExecStatus.TIMEOUT: Status.TIMEOUT, ExecStatus.MEMORY_LIMIT: Status.MEMORY_LIMIT,
    ExecStatus.OUTPUT_LIMIT: Status.OUTPUT_LIMIT, ExecStatus.ERROR: Status.ERROR,
}
REWARD_MODES = ("fraction", "binary")
HIDDEN_REWARDS = ("shown", "both")  # what a record with `hidden_tests` is rewarded on


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    r"""(language, body) of every fenced block: "```" and an info line, then the body up to the next "```" or the end.

    A scan with str.find, linear in the text. It gives what the pattern
    r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)" (DOTALL) found with findall, which backtracked quadratically
    on completion text (100 kB of backticks: seconds on the host, before any sandbox limit).
    """
    blocks, pos = [], 0
    while (start := text.find("```", pos)) >= 0:
        newline = text.find("\n", start + 3)
        if newline < 0:  # no line ends after this fence, nor after any later one
            break
        lang = _FENCE_LANG.match(text, start + 3, newline).group(1)
        end = text.find("```", newline + 1)
        if end < 0:  # an unclosed block runs to the end of the text
            blocks.append((lang, text[newline + 1:]))
            break
        blocks.append((lang, text[newline + 1:end]))
        pos = end + 3
    return blocks


def extract_code(completion: str) -> str:
    """The last fenced code block's body, or the whole completion when it has no fence."""
    blocks = fenced_blocks(completion)
    if not blocks:
        return completion.strip("\n")
    return blocks[-1][1]


@register_verifier("code")
class CodeVerifier:
    """Runs extracted code against `record["tests"]` in a sandbox; see the module docstring."""

    name = "code"

    def __init__(self, backend: str = "docker", reward: str = "fraction", stop_at_first_failure: bool = False,
                 timeout_s: float = 10.0, memory_mb: int = 512, output_mb: int = 1, workers: int | None = None,
                 float_tol: float | None = None, hidden_reward: str = "both", dedupe: bool = True):
        if hidden_reward not in HIDDEN_REWARDS:
            raise ConfigError(f"code verifier: 'hidden_reward' must be one of {', '.join(HIDDEN_REWARDS)}, got {hidden_reward!r}")
        self.hidden_reward = hidden_reward
        if not isinstance(dedupe, bool):
            raise ConfigError(f"code verifier: 'dedupe' must be true or false, got {dedupe!r}")
        self.dedupe = dedupe
        if backend not in BACKENDS:
            raise ConfigError(f"code verifier: 'backend' must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if reward not in REWARD_MODES:
            raise ConfigError(f"code verifier: 'reward' must be one of {', '.join(REWARD_MODES)}, got {reward!r}")
        for key, value in (("timeout_s", timeout_s), ("memory_mb", memory_mb), ("output_mb", output_mb)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"code verifier: {key!r} must be a positive number, got {value!r}")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"code verifier: 'workers' must be an int >= 1, got {workers!r}")
        if float_tol is not None and not _is_tolerance(float_tol):
            raise ConfigError(f"code verifier: 'float_tol' must be a finite number >= 0, got {float_tol!r}")
        self.backend, self.reward_mode = backend, reward
        self.stop_at_first_failure, self.workers, self.float_tol = bool(stop_at_first_failure), workers, float_tol
        self.limits = Limits(wall_s=float(timeout_s), cpu_s=float(timeout_s), memory_bytes=int(memory_mb * MiB),
                             output_bytes=int(output_mb * MiB))
        self._sandbox = None
        self._lock = threading.Lock()

    @property
    def sandbox(self):
        """The sandbox, started on first use (constructing a verifier never touches Docker)."""
        with self._lock:
            if self._sandbox is None:
                options = {"pool_size": self.workers} if self.backend == "docker" else {"workers": self.workers}
                self._sandbox = get_sandbox(self.backend, limits=self.limits, **options)
            return self._sandbox

    def close(self) -> None:
        """Stop the sandbox (removes warm containers); the next call starts a new one."""
        with self._lock:
            sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def __call__(self, completion: str, record: Mapping[str, Any]) -> VerifyResult:
        return self.verify_batch([completion], [record], workers=1)[0]

    def verify_batch(self, completions: Sequence[str], records: Sequence[Mapping[str, Any]], workers: int | None = None,
                     progress: Callable[[int], None] | None = None) -> list[VerifyResult]:
        """One VerifyResult per (completion, record), in input order; `progress(k)` as k more finish.

        Records run concurrently on `workers` threads (default: all the sandbox runs at once: the verifier's `workers`
        on each Docker host, else the CPU count);
        the sandbox bounds how many programs execute at once.

        With `dedupe` (the default), completions whose code and tests are identical within the batch run once,
        and each copy gets that run's result, marked `details["same_as"]` (the index of the one that ran): a
        GRPO group often samples one program several times. A verdict is then one run's, as it is for any
        single completion; set dedupe=False to run every copy (a program whose outcome varies run to run).
        """
        if len(completions) != len(records):
            raise ValueError(f"verify_batch got {len(completions)} completions for {len(records)} records")
        results: list[VerifyResult | None] = [None] * len(records)
        pending: dict[int, tuple[str, dict]] = {}
        for i, (completion, record) in enumerate(zip(completions, records)):
            prepared = self._prepare(completion, record)
            if isinstance(prepared, VerifyResult):
                results[i] = prepared
            else:
                pending[i] = prepared
        if progress is not None and len(pending) < len(records):
            progress(len(records) - len(pending))
        copies = _copies(pending) if self.dedupe else {i: [] for i in pending}  # index that runs -> its copies
        if pending:
            n_threads = min(len(copies), workers or _default_workers(self.sandbox, self.workers))
            sandbox = self.sandbox
            with ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="rlvr-code") as pool:
                try:
                    futures = {pool.submit(self._judge_alone, sandbox, *pending[i]): i for i in copies}
                    remaining = set(futures)
                    while remaining:
                        done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                        for future in done:
                            first = futures[future]
                            results[first] = result = future.result()
                            for i in copies[first]:
                                results[i] = VerifyResult(result.reward, result.status,
                                                          {**copy.deepcopy(result.details), "same_as": first})
                        if progress is not None:
                            progress(sum(1 + len(copies[futures[f]]) for f in done))
                except BaseException:  # Ctrl-C: stop what runs now, so nothing is left behind
                    for future in futures:
                        future.cancel()
                    self.close()
                    raise
        return results  # type: ignore[return-value]

    def _prepare(self, completion: str, record: Mapping[str, Any]) -> tuple[str, dict] | VerifyResult:
        """(code, tests) to run, or the final result for a malformed record or a completion without code."""
        try:
            tests = _check_tests(record.get("tests") if isinstance(record, Mapping) else None)
        except ValueError as error:
            return VerifyResult(0.0, Status.ERROR, {"error": str(error)})
        if not isinstance(completion, str):
            return VerifyResult(0.0, Status.ERROR, {"error": f"completion must be a string, got {type(completion).__name__}"})
        hidden = record.get("hidden_tests")
        if hidden is not None:
            try:
                hidden = _check_tests(hidden)
            except ValueError as error:
                return VerifyResult(0.0, Status.ERROR, {"error": f"hidden_tests: {error}"})
            if hidden["kind"] != tests["kind"] or hidden["kind"] == "assert":
                return VerifyResult(0.0, Status.ERROR, {"error": "hidden_tests must be stdio or call cases of the tests' kind"})
            tests = {**tests, "hidden": hidden}
        code = extract_code(completion)
        if not code.strip():
            return VerifyResult(0.0, Status.UNPARSABLE, {"reason": "no code in the completion"})
        return code, tests

    def _judge_alone(self, sandbox, code: str, tests: dict) -> VerifyResult:
        """_judge, with an exception on the host (a verifier bug, a value nobody foresaw) this record's `error`,
        never the batch's: every value derived from a completion is hostile on the host too."""
        try:
            return self._judge(sandbox, code, tests)
        except SandboxUnavailable:
            raise
        except Exception as error:
            return VerifyResult(0.0, Status.ERROR, {"error": f"judging this record failed: {_describe(error)}",
                                                    "code": _clip(code, 2000)})

    def _judge(self, sandbox, code: str, tests: dict) -> VerifyResult:
        """One run's result; with held-back tests (`tests["hidden"]`), the pass rate on each side too:
        hidden_reward=shown judges the shown and the hidden cases in two runs and rewards the shown;
        both judges them together. details: shown_pass, hidden_pass, hidden_gap (shown - hidden)."""
        hidden = tests.get("hidden")
        if hidden is None:
            return self._judge_one(sandbox, code, tests)
        shown = {k: v for k, v in tests.items() if k != "hidden"}
        n = len(shown["cases"])
        if self.hidden_reward == "both":
            result = self._judge_one(sandbox, code, {**shown, "cases": list(shown["cases"]) + list(hidden["cases"])})
            passed = [t["passed"] for t in result.details.get("tests", [])]
            shown_passed, hidden_passed, hacks = passed[:n], passed[n:], result.details.get("hacks", [])
        else:
            result = self._judge_one(sandbox, code, shown)
            other = self._judge_one(sandbox, code, {**shown, "cases": list(hidden["cases"])})
            shown_passed = [t["passed"] for t in result.details.get("tests", [])]
            hidden_passed = [t["passed"] for t in other.details.get("tests", [])]
            hacks = list(dict.fromkeys(result.details.get("hacks", []) + other.details.get("hacks", [])))
        shown_pass = sum(shown_passed) / len(shown["cases"])
        hidden_pass = sum(hidden_passed) / len(hidden["cases"])
        details = {**result.details, "shown_pass": shown_pass, "hidden_pass": hidden_pass,
                   "hidden_gap": shown_pass - hidden_pass, **({"hacks": hacks} if hacks else {})}
        return VerifyResult(result.reward, result.status, details)

    def _judge_one(self, sandbox, code: str, tests: dict) -> VerifyResult:
        if tests["kind"] == "stdio":
            return self._judge_stdio(sandbox, code, tests)
        execution = sandbox.run(CANDIDATE, candidate_input(code, tests), self.limits,
                                checker=Checker(CHECKER, checker_input(tests)))
        report = parse_report(execution.verdict)
        n = 1 if tests["kind"] == "assert" else len(tests["cases"])
        per_test: list[dict[str, Any]] = []
        for i in range(n):
            tag, payload = report.outcomes.get(i, ("MISSING", ""))
            if tag == "RESULT":
                expected = tests["cases"][i]["expected"]
                try:
                    got = read_result(payload)
                except WireError:
                    got, passed = payload, False
                else:
                    passed = values_equal(got, expected, tests.get("float_tol", self.float_tol))
                per_test.append({"passed": passed, "got": _clip(got), "expected": _clip(expected)})
            else:
                per_test.append({"passed": tag == "PASS", **({"error": payload} if payload else {}),
                                 **({"outcome": tag.lower()} if tag != "PASS" else {})})
        details = {"code": _clip(code, 2000), "tests": per_test, **_execution_details(execution)}
        hacks = code_hacks(execution, report)
        if hacks:
            details["hacks"] = hacks
            details["observed"] = report.observed
        if report.syntax_error is not None:
            details["error"] = report.syntax_error
        elif report.crash is not None:
            details["error"] = report.crash
        status = self._status(execution, report, per_test)
        return VerifyResult(self._reward(per_test), status, details)

    def _status(self, execution: Execution, report, per_test: list[dict]) -> Status:
        if execution.status in LIMIT_STATUS:
            return LIMIT_STATUS[execution.status]
        if (report.crash or "").startswith("MemoryError"):
            return Status.MEMORY_LIMIT
        if report.syntax_error is not None or report.crash is not None or not report.done:
            return Status.RUNTIME_ERROR
        first_failure = next((t for t in per_test if not t["passed"]), None)
        if first_failure is None:
            return Status.CORRECT
        if first_failure.get("outcome") != "error":
            return Status.INCORRECT
        return Status.MEMORY_LIMIT if first_failure.get("error", "").startswith("MemoryError") else Status.RUNTIME_ERROR

    def _judge_stdio(self, sandbox, code: str, tests: dict) -> VerifyResult:
        per_test: list[dict[str, Any]] = []
        status = Status.CORRECT
        last: Execution | None = None
        for case in tests["cases"]:
            if self.stop_at_first_failure and status is not Status.CORRECT:
                per_test.append({"passed": False, "outcome": "not_run"})
                continue
            last = execution = sandbox.run(code, case.get("stdin", ""), self.limits)
            if execution.status in LIMIT_STATUS:
                case_status = LIMIT_STATUS[execution.status]
            elif not execution.ok:
                case_status = Status.RUNTIME_ERROR
            elif stdout_matches(execution.stdout, case["stdout"], tests.get("float_tol", self.float_tol)):
                case_status = Status.CORRECT
            else:
                case_status = Status.INCORRECT
            per_test.append({"passed": case_status is Status.CORRECT, "status": case_status.value,
                             "exit_code": execution.exit_code, "stdout": _clip(execution.stdout),
                             "stderr": _clip(execution.stderr[-500:])})
            if status is Status.CORRECT and case_status is not Status.CORRECT:
                status = case_status  # the first failing case says why
        details = {"code": _clip(code, 2000), "tests": per_test, **(_execution_details(last) if last else {})}
        return VerifyResult(self._reward(per_test), status, details)

    def _reward(self, per_test: list[dict]) -> float:
        passed = [t["passed"] for t in per_test]
        if self.stop_at_first_failure and False in passed:
            passed = passed[:passed.index(False)]
        if self.reward_mode == "binary":
            return float(bool(per_test) and all(t["passed"] for t in per_test))
        return sum(passed) / len(per_test) if per_test else 0.0


def _copies(pending: dict[int, tuple[str, dict]]) -> dict[int, list[int]]:
    """The first index of each distinct (code, tests) in `pending` -> the later indices with the same pair."""
    first: dict[tuple[str, Any], int] = {}
    copies: dict[int, list[int]] = {}
    for i, (code, tests) in pending.items():
        try:
            key: tuple[str, Any] = (code, json.dumps(tests, sort_keys=True, default=repr))
        except (ValueError, TypeError, RecursionError):  # tests JSON cannot write (an int past 4,300 digits): no copies
            key = (code, i)
        if key in first:
            copies[first[key]].append(i)
        else:
            first[key], copies[i] = i, []
    return copies


def _check_tests(tests: Any) -> dict:
    """`tests` validated (a JSON string is parsed first); ValueError naming the bad field."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except ValueError as error:
            raise ValueError(f"record 'tests' is a string but not JSON: {error}") from None
    if not isinstance(tests, Mapping):
        raise ValueError("record has no 'tests' object (kinds: stdio, assert, call)")
    kind = tests.get("kind")
    if kind == "assert":
        for key in ("code", "entry_point"):
            if not isinstance(tests.get(key), str) or not tests[key]:
                raise ValueError(f"assert tests need a non-empty string {key!r}")
        if not isinstance(tests.get("prefix", ""), str):
            raise ValueError("assert tests: 'prefix' must be a string")
        return dict(tests)
    if kind not in ("stdio", "call"):
        raise ValueError(f"tests 'kind' must be stdio, assert or call, got {kind!r}")
    cases = tests.get("cases")
    if not isinstance(cases, Sequence) or isinstance(cases, str) or not cases:
        raise ValueError(f"{kind} tests need a non-empty list 'cases'")
    tol = tests.get("float_tol")
    if tol is not None and not _is_tolerance(tol):
        raise ValueError(f"tests 'float_tol' must be a finite number >= 0, got {tol!r}")
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping):
            raise ValueError(f"tests case {i} must be an object")
        if kind == "stdio":
            if not isinstance(case.get("stdout"), str) or not isinstance(case.get("stdin", ""), str):
                raise ValueError(f"stdio case {i} needs string 'stdout' (and optional string 'stdin')")
        else:
            if "expected" not in case or not isinstance(case.get("args", []), list) or not isinstance(case.get("kwargs", {}), Mapping):
                raise ValueError(f"call case {i} needs 'expected' and a list 'args' (optional object 'kwargs')")
            try:
                wire_encode([case.get("args", []), dict(case.get("kwargs", {}))])
            except WireError as error:
                raise ValueError(f"call case {i}: arguments must be plain data ({error})") from None
    if kind == "call" and (not isinstance(tests.get("fn"), str) or not tests["fn"]):
        raise ValueError("call tests need the function name 'fn'")
    return dict(tests)


def _execution_details(execution: Execution) -> dict[str, Any]:
    return {"exec_status": execution.status.value, "exit_code": execution.exit_code,
            "wall_s": round(execution.wall_s, 4), "stderr": _clip(execution.stderr[-1000:], 1000)}


def _clip(value: Any, n: int = 200) -> Any:
    """`value` for details, JSON-native and short whatever it is (a returned value is anything the wire carries:
    an int past int-to-str's 4,300 digits, a Fraction, a set): text past `n` characters is cut."""
    if isinstance(value, str):
        return value if len(value) <= n else value[:n] + f"...[{len(value) - n} more chars]"
    if value is None or isinstance(value, (bool, float)):
        return value
    if type(value) is int and value.bit_length() > 13000:  # str() would refuse it
        return f"<an int of {value.bit_length()} bits>"
    try:
        text = json.dumps(value, default=repr)
    except (ValueError, TypeError, RecursionError):  # a huge int or a tuple key inside
        return _clip(_describe_value(value), n)
    if len(text) <= n:
        return json.loads(text)
    return text[:n] + f"...[{len(text) - n} more chars]"


def _describe_value(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<a {type(value).__name__} that cannot be shown>"


def _describe(error: BaseException) -> str:
    try:
        return f"{type(error).__name__}: {error}"[:500]
    except Exception:
        return type(error).__name__


def _is_tolerance(value: Any) -> bool:
    """A finite number >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int too large for a float
        return False


def _default_workers(sandbox, workers: int | None) -> int:
    """As many threads as the sandbox runs programs at once: a Docker sandbox's `capacity` (its `workers`
    containers on each of its hosts), else `workers`, else 2."""
    return int(getattr(sandbox, "capacity", 0) or workers or getattr(sandbox, "pool_size", 0) or 2)


def probe_rows(backend: str = "docker"):
    """Doctor rows: (name, status, contained, note) per entry of CHEATS (cheats.py): rows named
    "honest ..." must pass, every other must score 0 and end neither correct nor error."""
    verifier = CodeVerifier(backend=backend, timeout_s=5, workers=2)
    try:
        completions = [f"```python\n{code}```" for _name, code, _tests in CHEATS]
        results = verifier.verify_batch(completions, [{"tests": tests} for _n, _c, tests in CHEATS])
    finally:
        verifier.close()
    for (name, _code, _tests), result in zip(CHEATS, results):
        control = name.startswith("honest")
        ok = result.status is Status.CORRECT if control else (
            result.status not in (Status.CORRECT, Status.ERROR) and result.reward == 0)
        yield name, f"{result.status.value} (reward {result.reward:g})", ok, _why(result) if not ok else ""


def _why(result: VerifyResult) -> str:
    return str(result.details.get("error") or result.details.get("tests") or result.details.get("stderr"))[:200]
