"""Exact-answer matching: extraction modes, numeric and text normalisation, bad records."""

import pytest

from rlvr.verifiers.exact import ExactVerifier, parse_number
from rlvr.verifiers.extract import extract_answer_tag, extract_last_number
from rlvr.errors import ConfigError
from rlvr.verifiers.registry import build_verifier
from rlvr.verifiers.result import Status


def tag(x):
    return f"<think></think><answer>{x}</answer>"


@pytest.mark.parametrize("got,expected", [
    ("1,234", "1234"), ("1234", 1234), ("+5", "5"), ("\u22123", "-3"), ("-3", -3),
    ("2.50", "2.5"), ("0.1", 0.1), ("3.", "3"), ("1.0", "1"), ("Paris.", "paris"),
    ("  New   York ", "new york"), ("12,345,678", 12345678), ("123456789012345678901", "123456789012345678901"),
])
def test_matches(got, expected):
    r = ExactVerifier()(tag(got), {"answer": expected})
    assert (r.reward, r.status) == (1.0, Status.CORRECT)
    assert r.details == {"extracted": got.strip(), "expected": expected}


@pytest.mark.parametrize("got,expected", [
    ("1235", "1234"), ("-3", "3"), ("2.5000001", "2.5"), ("123456789012345678902", "123456789012345678901"),
    ("london", "paris"), ("1,23", "123"), ("4 apples", "4"),
])
def test_mismatches(got, expected):
    r = ExactVerifier()(tag(got), {"answer": expected})
    assert (r.reward, r.status) == (0.0, Status.INCORRECT)


def test_rel_tol_param():
    assert ExactVerifier(rel_tol=1e-3)(tag("2.5001"), {"answer": "2.5"}).status is Status.CORRECT
    assert ExactVerifier()(tag("2.5001"), {"answer": "2.5"}).status is Status.INCORRECT


def test_last_answer_block_counts():
    assert extract_answer_tag("<answer>1</answer> wait <answer> 2 </answer>") == "2"
    assert extract_answer_tag("<answer>a<answer>b</answer>") == "b"
    assert extract_answer_tag("<answer>open only") is None
    assert extract_answer_tag("no tags") is None


def test_last_number_extraction():
    assert extract_last_number("so 5-3 = 2, then 1,234.5") == "1,234.5"
    assert extract_last_number("5-3") == "3"
    assert extract_last_number("x = -7") == "-7"
    assert extract_last_number("none") is None
    v = build_verifier("exact", extract="last_number")
    assert v("the total is 1,000 dollars", {"answer": 1000}).status is Status.CORRECT


def test_full_extraction():
    v = build_verifier("exact", extract="full")
    assert v("  42.\n", {"answer": "42"}).status is Status.CORRECT


def test_no_answer_is_unparsable():
    r = ExactVerifier()("I think it is 4", {"answer": "4"})
    assert (r.reward, r.status) == (0.0, Status.UNPARSABLE)
    assert r.details["extracted"] is None
    assert ExactVerifier()(tag("   "), {"answer": "4"}).status is Status.UNPARSABLE


def test_bad_record_is_error_not_exception():
    r = ExactVerifier()(tag("4"), {})
    assert (r.reward, r.status, r.details) == (0.0, Status.ERROR, {"error": "record has no 'answer' field"})
    r = ExactVerifier()(tag("4"), {"answer": [4]})
    assert r.status is Status.ERROR and "list" in r.details["error"]


def test_bad_extract_param_named():
    with pytest.raises(ConfigError, match="'extract'"):
        ExactVerifier(extract="regex")


def test_parse_number():
    assert parse_number("1,234") == 1234 and isinstance(parse_number("1,234"), int)
    assert parse_number("-0.5") == -0.5
    assert parse_number(".5") == 0.5
    assert parse_number("1,2345") is None
    assert parse_number("1e5") is None
    assert parse_number("abc") is None
