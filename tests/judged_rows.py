"""Rows of code verified as one batch on a sandbox backend: what the honest and pandas tables share."""

import os

import pytest

from rlvr.verifiers.code.verifier import CodeVerifier


def judge_rows(backend: str, rows: list, probes: dict | None = None) -> tuple[dict, dict]:
    """`({row name: result}, {probe name: result})`: every `(name, code, tests)` row in one batch on `backend`, then
    each probe `name -> (code, tests)` alone. Skips docker where RLVR_SKIP_DOCKER=1."""
    if backend == "docker" and os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    verifier = CodeVerifier(backend=backend, timeout_s=5, workers=2)
    try:
        results = verifier.verify_batch([f"```python\n{code}```" for _n, code, _t in rows],
                                        [{"tests": tests} for _n, _c, tests in rows])
        probed = {name: verifier(f"```python\n{code}```", {"tests": tests})
                  for name, (code, tests) in (probes or {}).items()}
    finally:
        verifier.close()
    return {name: result for (name, _c, _t), result in zip(rows, results)}, probed
