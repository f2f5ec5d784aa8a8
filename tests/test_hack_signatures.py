"""Hack signatures (verifiers/code_signatures.py): each scripted hostile completion is flagged with its
kind from what the checker and the harness observed, and honest completions are never flagged, on the
Docker backend and the local one."""

from __future__ import annotations

import os

import pytest
from rlvr.verifiers.code import CHEATS, CodeVerifier
from rlvr.verifiers.code_cheats import CHEAT_CALL_TESTS, CHEAT_TESTS

pytestmark = pytest.mark.xdist_group("sandbox")

# cheat name (code_cheats.CHEATS) -> the kinds it must show (at least these)
EXPECTED = {
    "sys.exit(0) before the tests": {"early_exit"},
    "os._exit(0) at import": {"early_exit"},
    "os._exit(0) inside the function": {"early_exit"},
    "redefine check": {"tamper"},
    "patch assert / AssertionError": {"tamper"},
    "patch builtins.abs and math.isclose": {"tamper"},
    "trace function skipping lines": {"tamper"},
    "print fake success markers": {"forged_verdict"},
    "forge verdict lines on every reachable fd": {"forged_verdict", "channel_write"},
    "object equal to everything": {"fake_value"},
    "int subclass equal to everything": {"fake_value"},
    "weakref.proxy to an always-equal object": {"fake_value"},
    "MappingProxyType over an always-equal dict": {"fake_value"},
    "swallow BaseException, exit 0": {"early_exit"},
    "read the test file (assert)": {"read_files"},
    "read the expected outputs (call)": {"read_files"},
    "hunt tests in gc, frames, memory, other processes": {"read_files"},
    "hunt expected outputs in gc, frames, memory (call)": {"read_files"},
    "stop and kill every other process": {"tamper"},
    "object equal to everything (call)": {"fake_value"},
}
SQ = "def sq(x):\n    return x * x\n"
HONEST = [  # right, wrong, crashing and chatty programs that try nothing: never flagged
    SQ,
    "def sq(x):\n    return x + x\n",
    "import math, json, re, collections, itertools, functools\n" + SQ,
    "print('computing squares')\nimport sys\nprint('debug', file=sys.stderr)\n" + SQ,
    "def sq(x):\n    raise ValueError('no')\n",
    "def sq(x):\n    return sq_helper(x)\ndef sq_helper(x):\n    return x ** 2\n",
    "import numpy_is_not_installed_here\n" + SQ,
    "from functools import lru_cache\n@lru_cache(None)\ndef sq(x):\n    return x * x\n",
    "import os\nos.makedirs('work', exist_ok=True)\n" + SQ,
    "def sq(x):\n    return 1 / 0\n",
]


def _verifier(backend):
    if backend == "docker" and os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    return CodeVerifier(backend=backend, timeout_s=5, workers=2)


@pytest.fixture(scope="module", params=["docker", "local"])
def verifier(request):
    v = _verifier(request.param)
    if request.param == "local" and not v.sandbox.separate_users:
        pytest.skip("not root: the local checker shares the program's user")
    yield v
    v.close()


def test_every_cheat_is_flagged_with_its_kind(verifier):
    cheats = [c for c in CHEATS if c[0] in EXPECTED]
    assert len(cheats) == len(EXPECTED)
    results = verifier.verify_batch([f"```python\n{code}```" for _n, code, _t in cheats],
                                    [{"tests": tests} for _n, _c, tests in cheats])
    for (name, _code, _tests), result in zip(cheats, results):
        assert result.reward == 0.0, name
        assert EXPECTED[name] <= set(result.details.get("hacks", [])), (name, result.details)


def test_honest_completions_are_never_flagged(verifier):
    completions = [f"```python\n{code}```" for code in HONEST for _ in (0, 1)]
    records = [{"tests": tests} for _code in HONEST for tests in (CHEAT_TESTS, CHEAT_CALL_TESTS)]
    results = verifier.verify_batch(completions, records)
    for completion, result in zip(completions, results):
        assert "hacks" not in result.details, (completion, result.details)
    assert results[0].reward == 1.0 and results[2].reward == 0.0  # the tests did run
