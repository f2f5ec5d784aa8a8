"""`rlvr verify`: the record format of docs/verify.md, malformed lines, exit code, 10,000 records."""

import json

import pytest

from rlvr.cli import main
from rlvr.verifiers.batch import VerifyConfig, exit_code, verify_batch, verify_file
from rlvr.errors import ConfigError

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


def _write(path, lines):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_mixed_and_malformed_records_keep_order_and_name_line_and_field(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, [
        {"id": 1, "verifier": "math", "completion": r"\boxed{\frac12}", "answer": "0.5"},
        "{not json",
        {"id": 3, "verifier": "exact", "completion": "<answer>4</answer>", "answer": "4"},
        {"id": 4, "verifier": "math", "answer": "1"},
        {"id": 5, "completion": "x", "answer": "1"},
        {"id": 6, "verifier": "no_such_verifier", "completion": "x", "answer": "1"},
        [1, 2],
        {"id": 8, "verifier": "math", "completion": r"\boxed{x^2-1}", "answer": "(x-1)(x+1)"},
    ])
    summary = verify_file(str(src), str(dst), workers=1, show_progress=False)
    out = _read(dst)
    assert [o.get("id") for o in out] == [1, None, 3, 4, 5, 6, None, 8]
    assert [o["status"] for o in out] == ["correct", "error", "correct", "error", "error", "error", "error", "correct"]
    assert "line 2" in out[1]["details"]["error"] and out[1]["input"] == "{not json"
    assert "line 4" in out[3]["details"]["error"] and "'completion'" in out[3]["details"]["error"]
    assert "line 5" in out[4]["details"]["error"] and "'verifier'" in out[4]["details"]["error"]
    assert "line 6" in out[5]["details"]["error"] and "no_such_verifier" in out[5]["details"]["error"]
    assert "line 7" in out[6]["details"]["error"]
    assert out[0]["answer"] == "0.5" and out[0]["reward"] == 1.0 and out[0]["details"]["pred"] == r"\frac{1}{2}"
    assert summary["counts"] == {"correct": 3, "error": 5} and exit_code(summary) == 5


def test_verifier_override_and_bad_params(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, [{"completion": "so 7", "answer": "7"}])
    verify_file(str(src), str(dst), verifier_name="math", verifier_params={"last_number": True}, show_progress=False)
    assert _read(dst)[0]["status"] == "correct"
    scored = dst.read_text()
    with pytest.raises(ConfigError, match="rel_toll"):  # a misspelt parameter stops at start: no record is scored
        verify_file(str(src), str(dst), verifier_name="math", verifier_params={"rel_toll": 1}, show_progress=False)
    assert dst.read_text() == scored, "the earlier output must not be overwritten"
    with pytest.raises(ConfigError, match="no_such"):  # so does an unknown verifier= on the command line
        verify_file(str(src), str(dst), verifier_name="no_such", show_progress=False)


def test_misspelt_param_in_the_cli_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    _write(tmp_path / "in.jsonl", [{"verifier": "math", "completion": "7", "answer": "7"}])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["verify", "input=in.jsonl", "output=out.jsonl", "+params.timout=3"])
    assert "params" in str(info.value.code) and "timout" in str(info.value.code)
    assert not (tmp_path / "out.jsonl").exists()


def test_verify_without_output_is_one_line(tmp_path, monkeypatch, capsys):
    _write(tmp_path / "in.jsonl", [{"verifier": "math", "completion": "7", "answer": "7"}])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["verify", "input=in.jsonl"])
    assert "output= missing" in str(info.value.code) and "Traceback" not in capsys.readouterr().err


def test_record_without_answer_or_tests_names_its_line(tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, [{"verifier": "math", "completion": r"\boxed{7}", "answer": "7"}, {"verifier": "math", "completion": "7"},
                 {"verifier": "code", "completion": "print(1)", "tests": None},
                 {"verifier": "code", "completion": "print(1)", "tests": {"kind": "stdio"}}])
    verify_file(str(src), str(dst), workers=1, show_progress=False)
    out = _read(dst)
    assert [o["status"] for o in out] == ["correct", "error", "error", "error"]
    assert out[1]["details"]["error"].startswith("line 2: ") and "'answer'" in out[1]["details"]["error"]
    assert out[2]["details"]["error"].startswith("line 3: ") and "'tests'" in out[2]["details"]["error"]
    assert out[3]["details"]["error"].startswith("line 4: ") and "cases" in out[3]["details"]["error"]


def test_verify_help_shows_the_fields_of_every_kind_of_record(tmp_path, capsys):
    assert main(["verify", "--help"]) == 0
    text = capsys.readouterr().out
    for field in ('"answer"', '"tests"', '"kind": "stdio"', '"kind": "assert"', '"entry_point"', '"kind": "call"'):
        assert field in text, field


def test_batch_helper_falls_back_to_calls():
    calls = []

    def plain(completion, record):
        from rlvr.verifiers.result import Status, VerifyResult

        return VerifyResult(1.0, Status.CORRECT, {"c": completion})

    results = verify_batch(plain, ["a", "b"], [{}, {}], progress=calls.append)
    assert [r.details["c"] for r in results] == ["a", "b"] and sum(calls) == 2


def test_cli_exit_code_summary_and_progress(tmp_path, capsys):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(src, [{"completion": r"\boxed{2}", "answer": "2"}, {"completion": r"\boxed{3}"}, "oops"])
    code = main(["verify", f"input={src}", f"output={dst}", "verifier=math", "workers=1"])
    captured = capsys.readouterr()
    assert code == 2
    assert "verified 3 records" in captured.out and "error: 2" in captured.out and "records/s" in captured.out
    assert "verify" in captured.err and "rec/s" in captured.err  # tqdm's bar with its rate
    assert [o["status"] for o in _read(dst)] == ["correct", "error", "error"]


def test_cli_typo_key_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        main(["verify", "input=a", "output=b", "workerz=2"])
    assert info.value.code == "rlvr verify: workerz=2: the config has no key 'workerz'; did you mean workers? " \
                              "(rlvr verify --help all lists every key)"


def test_config_schema_keys():
    assert set(VerifyConfig.__dataclass_fields__) == {"input", "output", "verifier", "workers", "params", "sandbox"}


def test_ten_thousand_records(tmp_path):
    """GSM8K-style, MATH-style and malformed records mixed, as a GRPO run's samples would be."""
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    kinds = [
        lambda i: ({"completion": f"... so she has {i} left.\n#### {i}", "answer": str(i)}, "correct"),
        lambda i: ({"completion": rf"Thus $\boxed{{\frac{{{i}}}{{{i + 1}}}}}$.", "answer": rf"\frac{{{i}}}{{{i + 1}}}"}, "correct"),
        lambda i: ({"completion": rf"<answer>{i + 1}</answer>", "answer": str(i)}, "incorrect"),
        lambda i: ({"completion": "I give up.", "answer": str(i)}, "unparsable"),
        lambda i: ({"completion": rf"$\boxed{{x^2+{i % 7}x}}$", "answer": rf"x(x+{i % 7})"}, "correct"),
    ]
    records, expected = [], []
    for i in range(10_000):
        record, status = kinds[i % len(kinds)](i)
        records.append({"id": i, **record})
        expected.append(status)
    records[1234] = "{broken"
    expected[1234] = "error"
    _write(src, records)
    summary = verify_file(str(src), str(dst), verifier_name="math", show_progress=False)
    out = _read(dst)
    assert len(out) == 10_000
    assert [o["status"] for o in out] == expected
    assert [o.get("id") for o in out[:5]] == [0, 1, 2, 3, 4]
    assert summary["errors"] == 1


def test_hostile_return_values_cost_only_their_own_record(tmp_path):
    """A value that made the host's comparison raise (a huge int against a float
    tolerance) turned every record of its chunk into `error`; a lone surrogate in a returned string, or in
    the input line itself, crashed the writer and lost every later record. Each is now its own record's
    verdict, and every line of the output is UTF-8 JSON that reads back to what was scored."""
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    tests = {"kind": "call", "fn": "f", "float_tol": 1e-6, "cases": [{"args": [2], "expected": 4.0}]}

    def record(i, body, completion=None):
        return {"id": i, "verifier": "code", "tests": tests,
                "completion": completion or f"```python\ndef f(x):\n    return {body}\n```"}

    in_source = "```python\ndef f(x):\n    return x * x  # \ud800\n```"  # Python cannot compile it: runtime_error
    _write(src, [record(0, "x * x"), record(1, "10 ** 400"), record(2, "'\\ud800'"), record(3, "10 ** 5000"),
                 record(4, "[10 ** 5000, {'k': 10 ** 5000}]"), record(5, "", in_source), record(6, "x * x")])
    summary = verify_file(str(src), str(dst), workers=2, show_progress=False)
    raw = dst.read_bytes().decode("utf-8")  # strict: every line is valid UTF-8
    out = [json.loads(line) for line in raw.splitlines()]
    assert [o["id"] for o in out] == list(range(7))
    assert [o["status"] for o in out] == ["correct", "incorrect", "incorrect", "incorrect", "incorrect", "runtime_error",
                                          "correct"]
    assert out[2]["details"]["tests"][0]["got"] == "\ud800" and out[5]["completion"].endswith("\ud800\n```")
    assert summary["errors"] == 0
