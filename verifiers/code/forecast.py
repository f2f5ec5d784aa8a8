"""The calls an `assert` test will make, foreseen before the candidate answers any (a dry run of the test).

Standard library only and no rlvr imports: harness.py pastes this file's source into the checker program,
after wire.py's. Why it exists: a test's own control flow decides whether the next call happens (`if got !=
want: raise AssertionError`, an `and` chain holding `:=`, `unittest.TestCase().assertEqual`, `next()` over a
generator of checks), so the first wrong answer stops the test early; a candidate that counts its calls, with
any channel that outlives a run, learns where the test stopped and, sample after sample, the expected values.
So the checker (checker_program._rlvr_run_asserts) first runs the test here with a stand-in candidate that records each
call's wire-encoded arguments and answers AGREE, a value that agrees with every check (== anything, != nothing,
true, ordered either way, arithmetic gives itself back); then it makes every recorded call to the real
candidate, in that order; then it runs the test for real, answering each call from that table. What the
candidate sees (which calls, in which order, how many) is decided by the test's source alone, before the
first answer exists, whatever its answers are.

The stand-in's answers steer the dry run down the path every check passes, which is the longest path for
the usual test (a wrong answer cuts a test short, a right one does not). Where the real run makes a call
the dry run did not foresee (arguments computed from an earlier answer, randomness other than the `random`
module's, which the checker seeds alike for both runs, a path only a wrong answer opens, calls past
MAX_CALLS or past CPU_S of the checker's CPU), that call is made live, as before: only those can still tell
the candidate anything about its answers.

Departures: the test's own code (and the prompt's prefix) runs twice, once dry. A call foreseen but never made
in the real run still reaches the candidate (a search loop `while candidate(n) < 10: n += 1` is foreseen up to
MAX_CALLS calls), so an honest solution may do more work than the test needs. A dry run that loops without
calling the candidate (`while answer > 0: answer -= 1`) is stopped by the CPU timer at its next use of the
stand-in or of AGREE, as often as the test swallows that.
"""

MAX_CALLS = 2000  # calls foreseen; beyond them the dry run stops and the rest of the test's calls are made live
CPU_S = 0.5  # the checker's CPU the dry run may use (its own process: ITIMER_VIRTUAL)


_STOP = []  # set by the CPU timer: the stand-in and AGREE then raise _Enough (a handler that raised could
# land anywhere, even after the dry run; one that only sets a flag cannot)


class _Enough(BaseException):
    """Ends the dry run: MAX_CALLS foreseen, or CPU_S spent."""


def _go_on():
    if _STOP:
        raise _Enough()


class _Agree:
    """The dry run's answer: agrees with any check, so the test goes on as if every answer were right."""

    def __eq__(self, other):
        _go_on()
        return True

    def __ne__(self, other):
        _go_on()
        return False

    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __eq__

    def __bool__(self):
        _go_on()
        return True

    def __hash__(self):
        return 0

    def __len__(self):
        _go_on()
        return 0

    def __iter__(self):
        _go_on()
        return iter(())

    def __index__(self):
        _go_on()
        return 0

    __int__ = __index__

    def __float__(self):
        _go_on()
        return 0.0

    def __complex__(self):
        _go_on()
        return 0j

    def __str__(self):
        return ""

    def __repr__(self):
        return "AGREE"

    def __format__(self, spec):
        return ""

    def __itself(self, *args, **kwargs):
        _go_on()
        return self

    __getattr__ = __getitem__ = __call__ = __enter__ = __itself
    __neg__ = __pos__ = __abs__ = __invert__ = __round__ = __floor__ = __ceil__ = __trunc__ = __itself
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __itself
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __itself
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __lshift__ = __rshift__ = __divmod__ = __itself

    def __exit__(self, *exc):
        return False


AGREE = _Agree()


def rlvr_forecast(code, namespace, entry_point, encode, max_calls=MAX_CALLS, cpu_s=CPU_S):
    """The calls `check(candidate)` makes when every answer is AGREE: a list of [args, kwargs], wire-encoded by
    `encode`, in order. `code` is the guarded test code and `namespace` a fresh one it runs in; whatever the
    test raises ends the dry run, never the checker."""
    import signal

    calls = []

    def candidate(*args, **kwargs):
        _go_on()
        if len(calls) >= max_calls:
            raise _Enough()
        try:
            request = [encode(args), encode(kwargs)]
        except Exception:
            raise TypeError("the tests passed a value that cannot cross to the candidate") from None
        calls.append(request)
        return AGREE

    namespace[entry_point] = candidate
    _STOP.clear()
    previous = signal.signal(signal.SIGVTALRM, lambda signum, frame: _STOP.append(1))
    signal.setitimer(signal.ITIMER_VIRTUAL, cpu_s)
    try:
        exec(code, namespace)
        namespace["check"](candidate)
    except BaseException:  # _Enough, or the test's own failure: what it called so far is the forecast
        pass
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
    return calls
