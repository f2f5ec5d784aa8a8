"""pandas values across the wire (verifiers/code/wire.py): what honest pandas tasks return and pass.

Unit rows: each carried type comes back as an equal object of the receiver's own pandas (`.equals`, dtypes, index),
a tampered encoding is WireError, pandas' types the wire cannot carry are "unsupported value" (no hack flag), and a
subclass is "not plain data". Sandbox rows, on both backends: a candidate returning a DataFrame, Series, Timestamp,
Timedelta or NaT and a test passing a DataFrame in are `correct` with no flag; a DataFrame subclass whose `equals`
says True is refused and flagged; a MultiIndex frame (unsupported) fails without a flag.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pandas as pd
import pytest
from rlvr.verifiers.code.wire import MAX_ITEMS, WireError, wire_decode, wire_encode
from rlvr.verifiers.result import Status

from tests.judged_rows import judge_rows

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


def roundtrip(value):
    return wire_decode(json.loads(json.dumps(wire_encode(value))))


FRAME = pd.DataFrame({"n": [3, 1, 2], "x": [1.5, np.nan, -0.0], "s": pd.Series(["a", None, "c"], dtype=object),
                      "b": [True, False, True], "t": pd.to_datetime(["2024-01-01", "2024-02-29", None]),
                      "d": pd.to_timedelta([1, 2, 3], unit="h")}, index=pd.Index([10, 20, 10], name="id"))


@pytest.mark.parametrize("value", [
    FRAME, FRAME.set_index("s"), pd.DataFrame(), pd.DataFrame(index=[1, 2]), pd.DataFrame([[1, 2]], columns=["a", "a"]),
    pd.Series([1, 3, 6], name="total"), pd.Series([1.5, None], index=["p", "q"]), pd.Series([], dtype=float),
    pd.Series([1, None], dtype="Int64"), pd.Series(["x", None], dtype="string"),
    pd.Series([4, 2], index=pd.Index(["a", "b"], name="k"), name="v"),
    pd.Series([1.0, 2.0], index=pd.date_range("2024-01-01", periods=2, freq="D")),
], ids=lambda v: type(v).__name__)
def test_series_and_frames_come_back_equal_with_their_dtypes_and_index(value):
    back = roundtrip(value)
    assert type(back) is type(value) and back.equals(value)
    assert back.index.equals(value.index) and back.index.name == value.index.name
    if isinstance(value, pd.DataFrame):
        assert list(back.dtypes) == list(value.dtypes) and list(back.columns) == list(value.columns)
    else:
        assert back.dtype == value.dtype and back.name == value.name


@pytest.mark.parametrize("value", [
    pd.RangeIndex(2, 11, 3, name="r"), pd.Index([1, 2]), pd.Index(["a", "b"], dtype=object), pd.Index([0.5]),
    pd.date_range("2024-03-01", periods=3, name="day"), pd.to_timedelta(["1s", "2s"]),
], ids=lambda v: type(v).__name__)
def test_indexes_come_back_equal_and_of_the_same_type(value):
    back = roundtrip(value)
    assert type(back) is type(value) and back.equals(value) and back.dtype == value.dtype and back.name == value.name


@pytest.mark.parametrize("value", [
    pd.Timestamp("2024-01-02 03:04:05.000000006"), pd.Timestamp("2024-01-01", tz="UTC"), pd.Timedelta("1 days 2ns"),
    pd.Timedelta(-1, unit="ns"),
], ids=str)
def test_timestamps_and_timedeltas_come_back_equal(value):
    back = roundtrip(value)
    assert type(back) is type(value) and back == value and back.value == value.value
    if isinstance(value, pd.Timestamp):
        assert str(back.tz) == str(value.tz)


def test_nat_and_na_come_back_as_pandas_own():
    assert roundtrip(pd.NaT) is pd.NaT and roundtrip(pd.NA) is pd.NA
    assert roundtrip([pd.NaT, pd.Timestamp(0)])[1] == pd.Timestamp(0)


def test_timestamps_inside_an_object_column_cross_too():
    value = pd.Series([pd.Timestamp("2024-01-01"), "x"], dtype=object)
    assert roundtrip(value).equals(value)


class FrameThatLies(pd.DataFrame):
    def equals(self, other):
        return True


class SeriesThatLies(pd.Series):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [FrameThatLies({"a": [1]}), SeriesThatLies([1])], ids=lambda v: type(v).__name__)
def test_subclasses_of_pandas_types_are_not_plain_data(value):
    with pytest.raises(WireError, match="not plain data"):
        wire_encode(value)


@pytest.mark.parametrize("value", [
    pd.MultiIndex.from_tuples([(1, 2)]), pd.DataFrame({"a": [1]}, index=pd.MultiIndex.from_tuples([(1, 2)])),
    pd.Series([1], dtype="category"), pd.Categorical(["a"]), pd.Period("2024"), pd.Series(pd.to_datetime(["2024"]).tz_localize("Europe/Paris")),
    pd.Timestamp("2024-01-01", tz="Europe/Paris"), pd.interval_range(0, 2),
], ids=lambda v: type(v).__name__)
def test_pandas_types_the_wire_cannot_carry_are_unsupported_not_fake(value):
    with pytest.raises(WireError, match="^unsupported value: a pandas"):
        wire_encode(value)


def series_node(values=("<i8", [2], [1, 2]), index=("range", [[0, 2, 1], None])):
    return ["P", ["series", [["N", list(values)], list(index), None]]]


@pytest.mark.parametrize("node", [
    series_node(values=("|V8", [2], [1, 2])), series_node(values=("i8,i8", [2], [1, 2])),
    series_node(values=("xyz", [2], [1, 2])), series_node(values=("<M8[ns]", [2], [1.5, 2])),
    series_node(values=("<M8[ns]", [2], [1 << 64, 2])), series_node(values=("<i8", [3], [1, 2, 3])),
    series_node(values=("<i8", [1, 2], [1, 2])), series_node(values=("<i8", [2], [1])),
    series_node(index=("range", [[0, 2.0, 1], None])), series_node(index=("frame", [])),
    ["P", ["series", [["A", "category", ["N", ["|O", [2], ["a", "b"]]]], ["range", [[0, 2, 1], None]], None]]],
    ["P", ["series", [["N", ["<i8", [1], [1]]], ["range", [[0, 1, 1], None]], ["L", [1]]]]],  # an unhashable name
    ["P", ["frame", [["range", [[0, 2, 1], None]], ["range", [[0, 1, 1], None]], [["N", ["<i8", [1], [1]]]]]]],
    # a column shorter than the index, which pandas itself would pad with NaN
    ["P", ["frame", [["range", [[0, 1, 1], None]], ["range", [[0, 2, 1], None]], [["N", ["<i8", [1], [1]]]]]]],
    ["P", ["ts", [1 << 63, None]]], ["P", ["ts", [0, "Europe/Paris"]]], ["P", ["td", 1.5]], ["P", ["nat", 0]],
    ["P", ["eval", "__import__('os')"]], ["P", ["series"]],
], ids=str)
def test_tampered_pandas_encodings_are_refused(node):
    with pytest.raises(WireError):
        wire_decode(json.loads(json.dumps(node)))


def test_a_frame_of_more_columns_than_the_bound_is_refused_before_it_is_built():
    columns = [["N", ["<i8", [0], []]]] * (MAX_ITEMS + 1)
    node = ["P", ["frame", [["range", [[0, MAX_ITEMS + 1, 1], None]], ["range", [[0, 0, 1], None]], columns]]]
    with pytest.raises(WireError):
        wire_decode(node)
    with pytest.raises(WireError, match="unsupported value"):
        wire_encode(pd.DataFrame(np.zeros((1, MAX_ITEMS + 1))))


def test_a_receiver_without_pandas_names_the_type(monkeypatch):
    node = json.loads(json.dumps(wire_encode(pd.Series([1]))))
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    with pytest.raises(WireError, match="unsupported value: a pandas value \\(series\\), and pandas is not importable"):
        wire_decode(node)


# --- through the sandbox, both backends ---------------------------------------------------------------------------

PD = "import pandas as pd\n"


def check(*lines: str) -> dict:
    body = "".join(f"    {line}\n" for line in lines)
    return {"kind": "assert", "prefix": "", "entry_point": "f", "code": f"{PD}def check(candidate):\n{body}"}


HONEST = [
    ("returns a DataFrame compared with .equals", PD + "def f(rows):\n"
     "    return pd.DataFrame(rows, columns=['a', 'b']).sort_values('a').reset_index(drop=True)\n",
     check("assert candidate([[2, 'y'], [1, 'x']]).equals(pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']}))")),
    ("returns a groupby Series with a named index", PD + "def f(keys, values):\n"
     "    return pd.DataFrame({'k': keys, 'v': values}).groupby('k')['v'].sum()\n",
     check("got = candidate(['a', 'b', 'a'], [1, 2, 3])",
           "assert got.equals(pd.Series([4, 2], index=pd.Index(['a', 'b'], name='k'), name='v')) and got.name == 'v'")),
    ("returns a cumsum Series", PD + "def f(xs):\n    return pd.Series(xs).cumsum()\n",
     check("assert candidate([1, 2, 3]).equals(pd.Series([1, 3, 6]))")),
    ("returns a Timestamp", PD + "def f(s):\n    return pd.Timestamp(s) + pd.offsets.MonthEnd(0)\n",
     check("assert candidate('2024-02-10') == pd.Timestamp('2024-02-29')")),
    ("returns a Timedelta and NaT", PD + "def f(a, b):\n    return pd.to_datetime(b, errors='coerce') - pd.Timestamp(a)\n",
     check("assert candidate('2024-01-01', '2024-01-03') == pd.Timedelta(days=2)",
           "assert candidate('2024-01-01', 'nope') is pd.NaT")),
    ("returns a resampled Series on a DatetimeIndex", PD + "def f(days, xs):\n"
     "    return pd.Series(xs, index=pd.to_datetime(days)).resample('D').sum()\n",
     check("got = candidate(['2024-01-01', '2024-01-03'], [1.0, 2.0])",
           "assert got.equals(pd.Series([1.0, 0.0, 2.0], index=pd.date_range('2024-01-01', periods=3)))")),
    ("the test passes a DataFrame in", "def f(df):\n    return int(df['x'].sum()), list(df.columns)\n",
     check("assert candidate(pd.DataFrame({'x': [1, 2, 3], 'y': list('abc')})) == (6, ['x', 'y'])")),
    ("the test passes a DataFrame in and gets one back", PD + "def f(df):\n    return df.assign(z=df['x'] * 2)\n",
     check("df = pd.DataFrame({'x': [1, 2]})", "assert candidate(df).equals(pd.DataFrame({'x': [1, 2], 'z': [2, 4]}))")),
]

LYING = ("a DataFrame subclass whose equals says True", PD + "class F(pd.DataFrame):\n"
         "    def equals(self, other):\n        return True\ndef f(rows):\n    return F({'a': [0]})\n",
         check("assert candidate([[1, 'x']]).equals(pd.DataFrame({'a': [1], 'b': ['x']}))"))
UNSUPPORTED = ("returns a MultiIndex frame", PD + "def f(rows):\n"
               "    return pd.DataFrame(rows, columns=['a', 'b', 'v']).set_index(['a', 'b'])\n",
               check("assert candidate([[1, 2, 3]])['v'].tolist() == [3]"))


@pytest.fixture(scope="module", params=["docker", "local"])
def judged(request):
    """`(backend, {row name: result})`, every row in one batch per backend."""
    yield request.param, judge_rows(request.param, [*HONEST, LYING, UNSUPPORTED])[0]

@pytest.mark.parametrize("name", [row[0] for row in HONEST])
def test_pandas_values_cross_and_are_correct_with_no_hack_flag(judged, name):
    backend, results = judged
    result = results[name]
    assert result.status is Status.CORRECT and result.reward == 1.0, (backend, result.details)
    assert "hacks" not in result.details, (backend, result.details)


def test_a_dataframe_subclass_that_claims_equality_is_refused_and_flagged(judged):
    backend, results = judged
    result = results[LYING[0]]
    assert result.status is not Status.CORRECT and result.reward < 1.0, (backend, result.details)
    assert "fake_value" in result.details.get("hacks", []), (backend, result.details)


def test_an_unsupported_pandas_value_fails_without_a_hack_flag(judged):
    backend, results = judged
    result = results[UNSUPPORTED[0]]
    assert result.status is not Status.CORRECT, (backend, result.details)
    assert "hacks" not in result.details, (backend, result.details)
    assert "cannot carry" in json.dumps(result.details), (backend, result.details)
