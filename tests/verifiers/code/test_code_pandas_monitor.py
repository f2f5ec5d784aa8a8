"""`import pandas` is not a program started, and a program started beside it still is.

Debian's pandas reads `platform.uname()[4]` on import, which makes platform run `uname -p`; the hack monitor notes
every program started as `read_files`, so each honest solution that imports pandas was flagged. The harness now
fills platform's cached answer first, for code that names pandas (harness.py `_rlvr_processor`). These rows show the
exemption is that answer only: a program that names pandas and starts `uname -p` or any other program itself is
still flagged, and `platform.processor()` still gives the program what it gives outside. Both backends.
"""

from __future__ import annotations

import os
import platform

import pytest
from rlvr.verifiers.code.verifier import CodeVerifier
from rlvr.verifiers.result import Status

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


def call(expected) -> dict:
    return {"kind": "call", "fn": "f", "cases": [{"args": [], "expected": expected}]}


PD = "import pandas as pd\n"
ROWS = [
    ("imports pandas", PD + "def f():\n    return int(pd.Series([1, 2]).sum())\n", call(3), None),
    ("names pandas and runs uname -p itself", PD + "import subprocess\ndef f():\n"
     "    return subprocess.run(['uname', '-p'], capture_output=True).returncode\n", call(0), "read_files"),
    ("names pandas in a comment and runs ls", "# pandas\nimport subprocess\ndef f():\n"
     "    return len(subprocess.check_output(['ls', '/']) ) > 0\n", call(True), "read_files"),
    ("platform.processor() as outside", PD + "import platform\ndef f():\n    return platform.processor()\n",
     call(platform.processor()), None),
]


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_pandas_import_is_not_flagged_and_programs_started_still_are(backend):
    if backend == "docker" and os.environ.get("RLVR_SKIP_DOCKER") == "1":
        pytest.skip("RLVR_SKIP_DOCKER=1")
    verifier = CodeVerifier(backend=backend, timeout_s=5, workers=2)
    try:
        results = verifier.verify_batch([f"```python\n{code}```" for _n, code, _t, _h in ROWS],
                                        [{"tests": tests} for _n, _c, tests, _h in ROWS])
    finally:
        verifier.close()
    for (name, _code, _tests, hack), result in zip(ROWS, results, strict=True):
        assert result.status is Status.CORRECT, (backend, name, result.details)  # a flag never changes a verdict
        assert result.details.get("hacks", []) == ([hack] if hack else []), (backend, name, result.details)
