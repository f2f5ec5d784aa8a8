"""`rlvr verify` writes strict JSON (verifiers/batch.py): no line holds a bare NaN or Infinity, which Python's json
writes and reads by default but RFC 8259 and most other readers refuse."""

import json
import math

import pytest

from rlvr.verifiers.batch import jsonl_line, verify_file
from rlvr.verifiers.registry import verifier_registry
from rlvr.verifiers.result import Status, VerifyResult


def _strict(line):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(line, parse_constant=refuse)


def _values_verifier():
    """A verifier whose reward and details are the record's `value`, as a plugin's may be."""

    def verify(completion, record):
        value = float(record["value"])
        return VerifyResult(value, Status.CORRECT, {"value": value, "pair": [value, 1.0], float("nan"): "key"})

    return verify


@pytest.fixture
def values_verifier(monkeypatch):
    monkeypatch.setitem(verifier_registry._factories, "values_for_test", _values_verifier)


def test_a_non_finite_reward_is_an_error_record_and_every_line_is_strict_json(tmp_path, values_verifier):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    values = ["0.5", "nan", "inf", "-inf"]
    src.write_text("".join(json.dumps({"id": i, "completion": "x", "value": v}) + "\n" for i, v in enumerate(values))
                   + '{"id": 4, "completion": "x", "value": "1", "echoed": NaN}\n')  # Python's json reads it
    summary = verify_file(str(src), str(dst), verifier_name="values_for_test", show_progress=False)
    out = [_strict(line) for line in dst.read_text().splitlines()]
    assert [o["id"] for o in out] == [0, 1, 2, 3, 4]
    assert [o["status"] for o in out] == ["correct", "error", "error", "error", "correct"]
    assert [o["reward"] for o in out] == [0.5, 0.0, 0.0, 0.0, 1.0]
    assert out[1]["details"]["error"] == ("line 2: the verifier gave a reward of NaN, not a finite number "
                                          "(its status: correct)")
    assert "reward of -Infinity" in out[3]["details"]["error"]
    # the verifier's own details kept, each non-finite float written as a string
    assert out[2]["details"]["verifier_details"] == {"value": "Infinity", "pair": ["Infinity", 1.0], "NaN": "key"}
    assert out[4]["echoed"] == "NaN" and out[0]["details"]["NaN"] == "key"
    assert summary["errors"] == 3 and summary["counts"] == {"correct": 2, "error": 3}


@pytest.mark.parametrize("item", [
    {"reward": 1.0, "status": "correct", "details": {"got": math.nan, "deep": [[{"x": -math.inf}]]}},
    {"reward": 0.0, "status": "incorrect", "details": {"big": 10 ** 5000, "got": math.inf}},  # the fallback form
    {"reward": 0.0, "status": "incorrect", "details": {math.inf: (1.0, math.nan)}, "text": "\ud800"},
])
def test_every_form_of_a_line_is_strict_json(item):
    assert isinstance(_strict(jsonl_line(item)), dict)
