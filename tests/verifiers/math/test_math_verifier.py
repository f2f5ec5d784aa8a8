"""verifier=math: registration, config errors, statuses and details, options, pathological inputs."""

import pickle

import pytest

from rlvr.verifiers.math.extract import extract
from rlvr.verifiers.math.verifier import MathVerifier
from rlvr.errors import ConfigError
from rlvr.verifiers.result import Status


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(workers=2)
    yield v
    v.close()


def test_registered_and_built_by_name():
    from rlvr.verifiers.registry import build_verifier

    v = build_verifier("math", rel_tol=1e-4, last_number=True)
    assert v.name == "math" and "last_number" in v.order


@pytest.mark.parametrize("params,field", [
    ({"extract": ["boxed", "nope"]}, "extract"), ({"extract": "boxed"}, "extract"), ({"percent": "x"}, "percent"),
    ({"rel_tol": -1}, "rel_tol"), ({"timeout": 0}, "timeout"), ({"workers": -2}, "workers"),
])
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ConfigError, match=field):
        MathVerifier(**params)


def test_details_carry_extracted_and_both_normalised_sides(verifier):
    r = verifier(r"so $\boxed{\dfrac{1}{2}}$", {"answer": "0.5"})
    assert r.status is Status.CORRECT and r.reward == 1.0
    assert r.details["extractor"] == "boxed" and r.details["extracted"] == r"\dfrac{1}{2}"
    assert r.details["pred"] == r"\frac{1}{2}" and r.details["gold"] == "0.5"


@pytest.mark.parametrize("record,status", [
    ({}, Status.ERROR), ({"answer": None}, Status.ERROR), ({"answer": ""}, Status.ERROR), ({"answer": True}, Status.ERROR),
])
def test_bad_records_are_errors(verifier, record, status):
    r = verifier(r"\boxed{1}", record)
    assert r.status is status and "answer" in r.details["error"]


def test_gold_that_cannot_be_parsed_is_an_error_not_a_model_failure(verifier):
    r = verifier(r"\boxed{2}", {"answer": r"\frac{1}{"})
    assert r.status is Status.ERROR and "gold" in r.details["reason"]


def test_nothing_extracted_is_unparsable(verifier):
    r = verifier("I am not sure.", {"answer": "3"})
    assert r.status is Status.UNPARSABLE and r.reward == 0.0


def test_last_number_only_when_asked():
    text = "She has 3 apples and buys 4 more, so 7 in total."
    assert extract(text, ("boxed",)) is None
    v = MathVerifier(last_number=True, workers=1)
    assert v(text, {"answer": "7"}).status is Status.CORRECT
    v.close()


@pytest.mark.parametrize("percent,gold,pred,ok", [
    ("either", "0.28", r"28\%", True), ("either", "28", r"28\%", True), ("either", "0.28", "28", False),
    ("ratio", "28", r"28\%", False), ("ratio", "0.28", r"28\%", True), ("strip", "0.28", r"28\%", False),
    ("strip", "28", r"28\%", True),
])
def test_percent_modes(percent, gold, pred, ok):
    v = MathVerifier(percent=percent, workers=1)
    assert (v(rf"\boxed{{{pred}}}", {"answer": gold}).status is Status.CORRECT) == ok
    v.close()


def test_rel_tol_is_relative_to_the_gold():
    loose = MathVerifier(rel_tol=1e-2, workers=1)
    assert loose(r"\boxed{101}", {"answer": "100.0"}).status is Status.CORRECT
    assert loose(r"\boxed{0.0101}", {"answer": "0.0100"}).status is Status.CORRECT
    assert loose(r"\boxed{0.0102}", {"answer": "0.0100"}).status is Status.INCORRECT
    loose.close()


def test_in_process_mode_agrees_with_workers(verifier):
    direct = MathVerifier(workers=0)
    pairs = [(r"\boxed{x^2-1}", "(x-1)(x+1)"), (r"\boxed{\sqrt{8}}", r"2\sqrt2"), (r"\boxed{3}", "4")]
    for c, g in pairs:
        assert direct(c, {"answer": g}).status == verifier(c, {"answer": g}).status


def test_picklable_without_its_workers(verifier):
    verifier(r"\boxed{x}", {"answer": "x+0"})
    clone = pickle.loads(pickle.dumps(verifier))
    assert clone._pool is None and clone(r"\boxed{2}", {"answer": "2"}).status is Status.CORRECT


def test_pathological_inputs_return_and_leave_the_batch_alone():
    """Each gets a status (a result or `timeout`); the normal items beside them are scored normally."""
    nested = "1"
    for _ in range(200):
        nested = rf"\frac{{1}}{{1+{nested}}}"
    pathological = [
        r"\boxed{9^{9^{9^{9}}}}",
        r"\boxed{(x+1)^{100000}-x}",
        rf"\boxed{{{nested}}}",
        r"\boxed{" + "1+" * 25000 + "1}",  # a 50,000-character answer
        "(" * 3000 + "1" + ")" * 3000,
    ]
    normal = [(r"\boxed{\frac{1}{2}}", "0.5"), (r"\boxed{x^2+2x+1}", "(x+1)^2"), (r"\boxed{7}", "8")]
    completions = [p for p in pathological] + [c for c, _ in normal]
    records = [{"answer": "5"}] * len(pathological) + [{"answer": g} for _, g in normal]
    v = MathVerifier(workers=2, timeout=2.0)
    results = v.verify_batch(completions, records)
    v.close()
    for r in results[: len(pathological)]:
        assert r.status in (Status.TIMEOUT, Status.INCORRECT, Status.UNPARSABLE), r
        assert r.reward == 0.0
    assert [r.status for r in results[len(pathological):]] == [Status.CORRECT, Status.CORRECT, Status.INCORRECT]


def test_a_long_answer_equal_to_its_gold_is_correct():
    """At the default limit, not `correct or timeout`: an honest long answer that times out is a failed answer."""
    long_sum = "+".join(["1"] * 2000)
    v = MathVerifier(workers=1)
    try:
        result = v(rf"\boxed{{{long_sum}}}", {"answer": "2000"})
    finally:
        v.close()
    assert result.status is Status.CORRECT, result


def test_a_sympy_failure_is_an_error_not_a_wrong_answer(monkeypatch):
    """issue 51: an exception inside SymPy is a verifier failure; scoring it `incorrect` hides the bug."""
    import sympy

    def broken(*args, **kwargs):
        raise RuntimeError("simulated SymPy bug")

    for name in ("expand", "radsimp", "simplify", "cancel"):
        monkeypatch.setattr(sympy, name, broken)
    v = MathVerifier(workers=0)  # in-process, so the patched SymPy is the one used
    result = v(r"\boxed{\sqrt{2}+\sqrt{3}}", {"answer": r"\sqrt{5+2\sqrt{6}}"})
    assert result.status is Status.ERROR and result.reward == 0.0, result
    assert "simulated SymPy bug" in result.details["reason"]


def test_an_exception_anywhere_in_the_worker_is_an_error(monkeypatch):
    import rlvr.verifiers.math.symbolic as symbolic

    class Uncomparable:
        def __eq__(self, other):
            raise TypeError("cannot compare")

    monkeypatch.setattr(symbolic, "node_to_sympy", lambda node: Uncomparable())
    result = MathVerifier(workers=0)(r"\boxed{\sqrt{2}}", {"answer": r"\sqrt{2}+0"})
    assert result.status is Status.ERROR and "cannot compare" in result.details["reason"], result


@pytest.mark.parametrize("completion, gold", [
    ("So the total is 1.23e3", "1230"),  # read as 1230 once: a magnitude, paid as the answer
    ("So the total is 1.23e3", "3"),  # nor its exponent
    ("So the total is 1.23e3", "1.23"),  # nor its mantissa
])
def test_the_last_number_fallback_reads_no_exponent(completion, gold):
    v = MathVerifier(workers=0, last_number=True, lenient=False)
    assert v(completion, {"answer": gold}).status is not Status.CORRECT
    assert v("So the total is 1230", {"answer": "1230"}).status is Status.CORRECT


def test_the_shared_last_number_skips_scientific_notation():
    from rlvr.verifiers.extract import extract_last_number

    assert extract_last_number("we have 7 and then 3e5") == "7"
    assert extract_last_number("we have 7 and then 1.5E-3 here") == "7"
    assert extract_last_number("so 5-3 = 2, then 1,234.5") == "1,234.5"
