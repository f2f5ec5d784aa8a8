"""The code verifier: extraction, record checks, the three test kinds, statuses, and cheats that must not pass.

Runs against the Docker sandbox (the default backend) unless a test says otherwise; see
test_sandbox_docker.py for what happens when Docker is missing.
"""

from __future__ import annotations

import os

import pytest
from rlvr.errors import ConfigError
from rlvr.verifiers import registry
from rlvr.verifiers.code.verifier import CHEATS, CodeVerifier, extract_code
from rlvr.verifiers.code.compare import stdout_matches, values_equal
from rlvr.verifiers.result import Status

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide

ADD_STDIO = {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 7\n", "stdout": "12\n"}]}
ADD_CALL = {"kind": "call", "fn": "add", "cases": [{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}]}
ADD_ASSERT = {"kind": "assert", "prefix": "def add(a, b):\n", "entry_point": "add",
              "code": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"}
STDIO_ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
FN_ADD = "def add(a, b):\n    return a + b\n"


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\nDone."


@pytest.fixture(scope="module")
def verifier():
    if os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    from rlvr.sandboxes.docker_backend import SandboxUnavailable, docker_client

    try:
        docker_client(timeout=30)
    except SandboxUnavailable as error:
        pytest.fail(f"these tests need Docker: {error}. Run `make docker`, or set RLVR_SKIP_DOCKER=1 to skip them")
    v = CodeVerifier(timeout_s=3, workers=2)
    yield v
    v.close()


def test_extracts_last_fenced_block_or_whole_text():
    assert extract_code("```python\nA\n```\ntext\n```py\nB\n```") == "B\n"
    assert extract_code("no fence at all\n") == "no fence at all"
    assert extract_code("```python\nunclosed = 1\n") == "unclosed = 1\n"


def test_registered_and_config_checked():
    assert isinstance(registry.build_verifier("code"), CodeVerifier)
    with pytest.raises(registry.ConfigError, match="reward"):
        CodeVerifier(reward="partial")
    with pytest.raises(registry.ConfigError, match="backend"):
        CodeVerifier(backend="firecracker")


@pytest.mark.parametrize("record, message", [
    ({}, "no 'tests'"),
    ({"tests": {"kind": "fuzz"}}, "kind"),
    ({"tests": {"kind": "stdio", "cases": []}}, "non-empty"),
    ({"tests": {"kind": "call", "cases": [{"args": [1]}]}}, "expected"),
    ({"tests": {"kind": "assert", "code": "def check(c): pass"}}, "entry_point"),
    ({"tests": "{not json"}, "not JSON"),
])
def test_malformed_record_is_an_error_not_a_zero(record, message):
    result = CodeVerifier().verify_batch(["print(1)"], [record])[0]
    assert result.status is Status.ERROR and message in result.details["error"]


def test_no_code_is_unparsable():
    result = CodeVerifier().verify_batch(["```python\n\n```"], [{"tests": ADD_STDIO}])[0]
    assert result.status is Status.UNPARSABLE


def test_comparisons():
    assert stdout_matches("3  \n4\n", "3 4", None)
    assert not stdout_matches("3.0001", "3", None)
    assert stdout_matches("3.0001", "3.0", 1e-3)
    assert values_equal([1, 2.0000001], [1, 2.0], 1e-6)
    assert not values_equal(True, 1, None)


FACT_25 = 15511210043330985984000000


def _short(value) -> str:
    """A test id for any value (repr refuses ints past 4,300 digits)."""
    if isinstance(value, int) and value.bit_length() > 1000:
        return f"<{value.bit_length()}-bit int>"
    return repr(value)[:24]


def test_a_returned_range_is_never_listed_past_the_cap(monkeypatch):
    """A range crosses the wire as three ints, so the host must not list range(10**18) to compare it (it never
    returned): past MAX_RANGE_ITEMS a range equals nothing; up to it, the list it spells."""
    from rlvr.verifiers.code import compare

    assert not values_equal(range(10 ** 18), [0, 1, 2], None)
    assert not values_equal([range(10 ** 30)], [[0]], None)  # len() itself overflows on this one
    monkeypatch.setattr(compare, "MAX_RANGE_ITEMS", 5)
    assert values_equal(range(5), [0, 1, 2, 3, 4], None)
    assert not values_equal(range(6), [0, 1, 2, 3, 4, 5], None)


@pytest.mark.parametrize("got, expected, tol, equal", [
    (1234568, 1234567, 1e-6, False),  # exact ints compare exactly, whatever the tolerance
    (float(FACT_25), FACT_25, 1e-6, False),  # a float's rounding of an exact int is not that int
    (3.0, 3, 1e-6, True), (3.0, 3, None, True),  # an integral float exactly equal to the int is
    (2.9999999, 3, 1e-3, False),
    (3, 3.0000001, 1e-6, True),  # a float expected is approximate: the tolerance applies
    (10 ** 400, 1.0, 1e-6, False), (-(10 ** 400), 1.0, 1e-6, False), (10 ** 400, float("inf"), 1e-6, False),
    (10 ** 5000, 10 ** 5000, None, True), (10 ** 5000, 10 ** 5000 + 1, 1e-6, False),
    (float("nan"), float("nan"), 1e-6, False), (float("inf"), float("inf"), 1e-6, True),
], ids=_short)
def test_numbers_compare_exactly_unless_a_float_is_expected(got, expected, tol, equal):
    assert values_equal(got, expected, tol) is equal
    assert values_equal([got], [expected], tol) is equal and values_equal({"k": got}, {"k": expected}, tol) is equal


@pytest.mark.parametrize("got, expected, tol, equal", [
    ("1234568", "1234567", 1e-6, False), ("1000001", "1000000", 1e-3, False),
    (str(float(FACT_25)), str(FACT_25), 1e-6, False),
    ("3.0", "3", 1e-6, True), ("3.00", "3", None, False),  # without a tolerance tokens compare as text
    ("3", "3.0000001", 1e-6, True), ("1e400", "1.0", 1e-6, False), ("9" * 5000, "9" * 5000, 1e-6, True),
    ("9" * 5000, "9" * 4999 + "8", 1e-6, False), ("-0", "0", 1e-6, True), ("0x10", "16", 1e-6, False),
], ids=_short)
def test_stdout_numbers_compare_exactly_unless_a_float_is_expected(got, expected, tol, equal):
    assert stdout_matches(got, expected, tol) is equal


@pytest.mark.parametrize("tests, good, bad", [
    (ADD_STDIO, STDIO_ADD, "a, b = map(int, input().split())\nprint(a - b)\n"),
    (ADD_CALL, FN_ADD, "def add(a, b):\n    return a * b\n"),
    (ADD_ASSERT, FN_ADD, "def add(a, b):\n    return a * b\n"),
], ids=["stdio", "call", "assert"])
def test_kinds_pass_and_fail(verifier, tests, good, bad):
    ok, wrong = verifier.verify_batch([fenced(good), fenced(bad)], [{"tests": tests}] * 2)
    assert (ok.status, ok.reward) == (Status.CORRECT, 1.0)
    assert wrong.status is Status.INCORRECT and wrong.reward < 1.0


def test_assert_prefix_allows_a_body_only_completion(verifier):
    assert verifier(fenced("    return a + b\n"), {"tests": ADD_ASSERT}).status is Status.CORRECT


def test_fraction_binary_and_stop_at_first_failure(verifier):
    half = "def add(a, b):\n    return 3\n"  # right for (1, 2), wrong for (2, 2)
    assert verifier(fenced(half), {"tests": ADD_CALL}).reward == 0.5
    binary = CodeVerifier(reward="binary", timeout_s=3, workers=1)
    first_fails = CodeVerifier(stop_at_first_failure=True, timeout_s=3, workers=1)
    try:
        assert binary(fenced(half), {"tests": ADD_CALL}).reward == 0.0
        flipped = {**ADD_CALL, "cases": ADD_CALL["cases"][::-1]}  # the failing case first
        assert first_fails(fenced(half), {"tests": flipped}).reward == 0.0
    finally:
        binary.close()
        first_fails.close()


@pytest.mark.parametrize("code, status", [
    ("def add(a, b) return 1\n", Status.RUNTIME_ERROR),
    ("raise ValueError('boom')\n", Status.RUNTIME_ERROR),
    ("def add(a, b):\n    while True:\n        pass\n", Status.TIMEOUT),
    ("def add(a, b):\n    return bytearray(8 * 1024 ** 3)\n", Status.MEMORY_LIMIT),
    ("def add(a, b):\n    for _ in range(1 << 12):\n        print('x' * (1 << 20))\n", Status.OUTPUT_LIMIT),
], ids=["syntax", "crash", "timeout", "memory", "output"])
def test_statuses(verifier, code, status):
    result = verifier(fenced(code), {"tests": ADD_CALL})
    assert result.status is status and result.reward == 0.0


def test_stdio_crash_is_runtime_error(verifier):
    assert verifier(fenced("import sys\nsys.exit(1)\n"), {"tests": ADD_STDIO}).status is Status.RUNTIME_ERROR


@pytest.mark.parametrize("name, code, tests", CHEATS, ids=[c[0] for c in CHEATS])
def test_cheats_do_not_pass(verifier, name, code, tests):
    result = verifier(fenced(code), {"tests": tests})
    if name.startswith("honest"):
        assert result.status is Status.CORRECT, result.details
    else:
        assert result.status not in (Status.CORRECT, Status.ERROR) and result.reward == 0.0, result.details


def test_batch_keeps_order_and_reports_progress(verifier):
    codes = [STDIO_ADD if i % 2 == 0 else "print(0)\n" for i in range(6)]
    seen = []
    results = verifier.verify_batch([fenced(c) for c in codes] + ["no code here?"], [{"tests": ADD_STDIO}] * 6 + [{}],
                                    workers=2, progress=seen.append)
    assert [r.status for r in results[:6]] == [Status.CORRECT, Status.INCORRECT] * 3
    assert results[6].status is Status.ERROR
    assert sum(seen) == 7


@pytest.fixture(scope="module")
def local_verifier():
    v = CodeVerifier(backend="local", timeout_s=3, workers=2)
    yield v
    v.close()


@pytest.mark.parametrize("name, code, tests", CHEATS, ids=[c[0] for c in CHEATS])
def test_cheats_do_not_pass_on_the_local_backend(local_verifier, name, code, tests):
    if not local_verifier.sandbox.separate_users:
        pytest.skip("not root: the local checker shares the program's user (doctor says so)")
    result = local_verifier(fenced(code), {"tests": tests})
    if name.startswith("honest"):
        assert result.status is Status.CORRECT, result.details
    else:
        assert result.status not in (Status.CORRECT, Status.ERROR) and result.reward == 0.0, result.details


def test_local_backend_scores_the_same():
    local = CodeVerifier(backend="local", timeout_s=3, workers=2)
    results = local.verify_batch([fenced(FN_ADD), fenced("import os\nos._exit(0)\n")], [{"tests": ADD_ASSERT}] * 2)
    assert [r.status for r in results] == [Status.CORRECT, Status.RUNTIME_ERROR]


@pytest.mark.parametrize("dedupe", [True, False])
def test_identical_completions_in_a_batch_run_once_unless_dedupe_is_off(verifier, dedupe, monkeypatch):
    """A GRPO group often samples one program several times: with dedupe each distinct (code, tests) runs once
    and its copies get its result, marked same_as; without, every copy runs. Order and progress are kept."""
    v = CodeVerifier(timeout_s=10, workers=2, dedupe=dedupe)
    runs = []
    judge = CodeVerifier._judge_one

    def counted(self, sandbox, code, tests):
        runs.append(code)
        return judge(self, sandbox, code, tests)

    monkeypatch.setattr(CodeVerifier, "_judge_one", counted)
    # 0 and 2: the same program as two completions (other prose around one fence); 3: same code, other tests
    completions = [fenced(STDIO_ADD), fenced("print(0)\n"), f"Sure:\n```python\n{STDIO_ADD}```", fenced(STDIO_ADD)]
    other = {"kind": "stdio", "cases": [{"stdin": "2 2\n", "stdout": "5\n"}]}
    seen = []
    try:
        results = v.verify_batch(completions, [{"tests": ADD_STDIO}] * 3 + [{"tests": other}], progress=seen.append)
    finally:
        v.close()
    assert [r.status for r in results] == [Status.CORRECT, Status.INCORRECT, Status.CORRECT, Status.INCORRECT]
    assert sum(seen) == 4
    if dedupe:
        assert sorted(runs) == sorted([STDIO_ADD, "print(0)\n", STDIO_ADD])  # 3 distinct pairs, 3 runs
        assert results[2].details["same_as"] == 0 and results[2].reward == results[0].reward
        assert all("same_as" not in results[i].details for i in (0, 1, 3))
        assert results[2].details is not results[0].details
    else:
        assert len(runs) == 4 and not any("same_as" in r.details for r in results)


def test_dedupe_must_be_a_boolean():
    with pytest.raises(ConfigError, match="'dedupe' must be true or false"):
        CodeVerifier(dedupe="yes")


# Asserts on a boolean function: the second one's message calls the candidate again, as HumanEval/77's do, and
# the last one's all() would stop at the first False.
ORDER_TESTS = {
    "assert": {"kind": "assert", "prefix": "", "entry_point": "f",
               "code": "def check(candidate):\n    assert candidate(0) is True\n"
                       "    assert candidate(1) is False, 'got ' + str(candidate(1))\n"
                       "    assert all(candidate(x) == e for x, e in ((2, False), (3, True)))\n"},
    # short-circuits inside one assert: `and`, `or`, a chained comparison (the red team's oracle used `and`)
    "assert_and": {"kind": "assert", "prefix": "", "entry_point": "f",
                   "code": "def check(candidate):\n    assert candidate(0) is True and candidate(1) is False\n"
                           "    assert candidate(3) is True or candidate(2) is True\n"
                           "    assert False is candidate(2) is not candidate(3)\n"},
    "call": {"kind": "call", "fn": "f",
             "cases": [{"args": [i], "expected": e} for i, e in enumerate([True, False, False, True])]},
}


def _logged(answers: tuple) -> str:
    return f"import sys\ndef f(x):\n    sys.stderr.write(f'call {{x}}\\n')\n    return {answers!r}[x]\n"


@pytest.mark.parametrize("kind", ["assert", "assert_and", "call"])
@pytest.mark.parametrize("backend", ["docker", "local"])
def test_call_order_tells_a_program_nothing_about_its_answers(request, backend, kind):
    """Were the checker to stop at the first failing assert, "was I called again" would
    tell a program whether its last answer passed, and with any channel that outlives a run the samples of
    one prompt would learn the expected values without solving the task. The calls a program sees must be
    the same whatever it answers: right, all wrong, or half right."""
    verifier = request.getfixturevalue("verifier" if backend == "docker" else "local_verifier")
    programs = [(True, False, False, True), (False, True, True, False), (True, True, True, True), (True, False, True, False)]
    results = verifier.verify_batch([fenced(_logged(answers)) for answers in programs], [{"tests": ORDER_TESTS[kind]}] * 4)
    assert [r.status for r in results] == [Status.CORRECT] + [Status.INCORRECT] * 3, [r.details for r in results]
    logs = [[line for line in r.details["stderr"].splitlines() if line.startswith("call")] for r in results]
    assert logs[0] and all(log == logs[0] for log in logs), logs


def test_an_exception_on_the_host_is_its_records_error_alone(local_verifier, monkeypatch):
    """Whatever raises while one record is judged on the host is that record's `error`;
    the batch's other records keep their verdicts (it once turned a whole chunk into errors)."""
    from rlvr.verifiers.code import verifier as code

    compare = code.values_equal

    def fragile(got, expected, float_tol):
        if got == 7:
            raise OverflowError("a comparison nobody foresaw")
        return compare(got, expected, float_tol)

    monkeypatch.setattr(code, "values_equal", fragile)
    codes = [FN_ADD, "def add(a, b):\n    return 7\n", FN_ADD]
    results = local_verifier.verify_batch([fenced(c) for c in codes], [{"tests": ADD_CALL}] * 3)
    assert [r.status for r in results] == [Status.CORRECT, Status.ERROR, Status.CORRECT]
    assert "OverflowError: a comparison nobody foresaw" in results[1].details["error"]


def test_eager_and_or_and_chains_decide_as_the_short_circuit_would():
    """The checker's rewrite (_rlvr_eager) calls every operand, then takes the value Python's short-circuit gives,
    raising an operand's exception only where the short-circuit would have reached it."""
    from rlvr.verifiers.code.harness import CHECKER

    ns = {}
    exec(CHECKER.rsplit("_rlvr_check()", 1)[0], ns)  # the checker's definitions, without running it
    cases = ["0 and boom()", "1 and 2 and 3", "1 and 0 and boom()", "0 or [] or 5", "7 or boom()", "0 or boom()",
             "1 < 2 < 3", "3 < 2 < boom()", "1 < 2 > boom()", "1 in [1] not in [2]", "(0 or 2) and (3 < 4 < 5)"]
    for expression in cases:
        calls = []

        def boom():
            calls.append("boom")
            raise ValueError("boom")

        source = f"def check():\n    assert {expression}\n"
        scope = {**{k: ns[k] for k in ("_rlvr_boolop", "_rlvr_chain")}, "boom": boom,
                 "_rlvr_assertion": lambda line, outcome, message: scope.__setitem__("outcome", outcome)}
        exec(ns["_rlvr_guard"](source), scope)
        scope["check"]()
        ran = list(calls)
        try:
            expected = bool(eval(expression, {"boom": boom}))
        except ValueError as error:
            expected = error
        outcome = scope["outcome"]
        assert type(outcome) is type(expected) and (outcome == expected or isinstance(outcome, ValueError)), expression
        assert "boom" not in expression or ran == ["boom"], expression  # every operand ran, reached or not


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_an_honest_value_too_large_to_carry_is_not_a_fake_value(request, backend):
    """A 5 MB string is past the wire's message cap: the test gets an error, and the run is no `fake_value` hack
    (before, every value the serialiser refused, too large included, was charged as one)."""
    v = request.getfixturevalue("verifier" if backend == "docker" else "local_verifier")
    tests = {"kind": "assert", "prefix": "", "entry_point": "f",
             "code": "def check(candidate):\n    assert len(candidate(5_000_000)) == 5_000_000\n"}
    result = v(fenced("def f(n):\n    return 'x' * n\n"), {"tests": tests})
    assert result.status is not Status.CORRECT and "too large" in str(result.details), result.details
    assert "fake_value" not in result.details.get("hacks", []), result.details
