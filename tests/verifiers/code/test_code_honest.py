"""Honest programs are never failed: ordinary solutions, judged `correct` with no hack flag.

Each row is a solution a careful programmer might write: standard-library return types (Counter,
OrderedDict, defaultdict, deque, named tuples, Fraction, Decimal, sets, bytes, huge ints, generators and
iterators, complex numbers, ranges, dates, times and time deltas), scratch files (tempfile, the working
directory), numpy values and arrays whose shape and dtype the test reads, tests that import numpy
themselves, pandas used by the solution (groupby, pivot, read_csv of a file it wrote, NaN, Timestamps) or by
the test (`.equals` on what it builds from the answer), the usual printing styles for `stdio` tests, and exceptions
a test expects. These pandas rows hand plain data across (`.tolist()`, `.to_dict()`); pandas objects themselves
(Series, DataFrame, Index, Timestamp) crossing the wire in either direction are tests/verifiers/code/test_code_wire_pandas.py's
rows. A verifier that fails them teaches a policy to avoid the standard library and counts
honest answers as `fake_value` hacks. Every row runs on both backends, the whole table in one batch per backend.
"""

from __future__ import annotations

import math

import pytest
from rlvr.verifiers.result import Status

from tests.judged_rows import judge_rows

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


def call(cases: list, **extra) -> dict:
    """A `call` test of f: `cases` as (args, expected) pairs."""
    return {"kind": "call", "fn": "f", "cases": [{"args": list(a), "expected": e} for a, e in cases], **extra}


def check(*lines: str, prefix: str = "") -> dict:
    """An `assert` test of f: `lines` are the body of check(candidate)."""
    body = "".join(f"    {line}\n" for line in lines)
    return {"kind": "assert", "prefix": "", "entry_point": "f", "code": f"{prefix}def check(candidate):\n{body}"}


def stdio(*cases: tuple, **extra) -> dict:
    return {"kind": "stdio", "cases": [{"stdin": i, "stdout": o} for i, o in cases], **extra}


RAISES = "try:\n        candidate({arg})\n    except {exc}:\n        pass\n    else:\n        assert False, 'no {exc}'"
FACT_2000 = math.factorial(2000)  # 5,736 digits: more than int-to-str allows without raising the limit

HONEST: list[tuple[str, str, dict]] = [
    # call tests: the host compares the returned value with the JSON expected value
    ("Counter of words", "from collections import Counter\ndef f(s):\n    return Counter(s.split())\n",
     call([(["a b a"], {"a": 2, "b": 1}), ([""], {})])),
    ("Counter.most_common", "from collections import Counter\ndef f(s):\n    return Counter(s).most_common(2)\n",
     call([(["abacab"], [["a", 3], ["b", 2]])])),
    ("OrderedDict", "from collections import OrderedDict\ndef f(n):\n    return OrderedDict((i, i * i) for i in range(n))\n",
     call([([3], {"0": 0, "1": 1, "2": 4})])),
    ("defaultdict(int)", "from collections import defaultdict\ndef f(s):\n    d = defaultdict(int)\n"
     "    for c in s:\n        d[c] += 1\n    return d\n", call([(["aab"], {"a": 2, "b": 1})])),
    ("defaultdict(list) grouping", "from collections import defaultdict\ndef f(words):\n    g = defaultdict(list)\n"
     "    for w in words:\n        g[len(w)].append(w)\n    return g\n",
     call([([["ab", "c", "de"]], {"2": ["ab", "de"], "1": ["c"]})])),
    ("deque from a BFS", "from collections import deque\ndef f(n):\n    q = deque(range(n))\n    q.rotate(1)\n    return q\n",
     call([([3], [2, 0, 1])])),
    ("namedtuple", "from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f(a, b):\n    return P(a, b)\n",
     call([([1, 2], [1, 2])])),
    ("typing.NamedTuple in a list", "from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\n    y: int\n"
     "def f(n):\n    return [P(i, -i) for i in range(n)]\n", call([([2], [[0, 0], [1, -1]])])),
    ("Fraction for a float expected",
     "from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b) + Fraction(1, 6)\n",
     call([([1, 3], 0.5)])),
    ("integral Fraction for an int expected", "from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b)\n",
     call([([4, 2], 2)])),
    ("Decimal within float_tol", "from decimal import Decimal\ndef f(a, b):\n    return Decimal(a) + Decimal(b)\n",
     call([(["0.1", "0.2"], 0.3)], float_tol=1e-9)),
    ("Decimal equal to a float exactly", "from decimal import Decimal\ndef f(s):\n    return Decimal(s)\n",
     call([(["2.50"], 2.5)])),
    ("tuple for a list (divmod)", "def f(a, b):\n    return divmod(a, b)\n", call([([7, 2], [3, 1])])),
    ("dict with int keys", "def f(n):\n    return {i: str(i) for i in range(n)}\n", call([([2], {"0": "0", "1": "1"})])),
    ("a 5,736-digit int", "import math\ndef f(n):\n    return math.factorial(n)\n", call([([2000], FACT_2000)])),
    ("a 5,736-digit int as an argument", "def f(n):\n    return n % 1000003\n", call([([FACT_2000], FACT_2000 % 1000003)])),
    ("bool", "def f(n):\n    return n % 2 == 0\n", call([([2], True), ([3], False)])),
    ("None", "def f(xs):\n    xs.sort()\n", call([([[2, 1]], None)])),
    ("zip of tuples", "def f(a, b):\n    return list(zip(a, b))\n", call([([[1, 2], ["a", "b"]], [[1, "a"], [2, "b"]])])),
    ("unicode text", "def f(s):\n    return s.upper() + ' ✓'\n", call([(["héllo"], "HÉLLO ✓")])),
    ("sorted set", "def f(xs):\n    return sorted(set(xs))\n", call([([[3, 1, 3]], [1, 3])])),
    ("float sum within float_tol", "def f(n):\n    return sum([0.1] * n)\n", call([([10], 1.0)], float_tol=1e-9)),
    ("int for a float expected", "def f(a, b):\n    return a + b\n", call([([1, 1], 2.0)])),
    ("integral float for an int expected", "def f(a, b):\n    return a / b\n", call([([6, 2], 3)])),
    ("keyword arguments", "def f(a, *, scale=1):\n    return a * scale\n",
     {"kind": "call", "fn": "f", "cases": [{"args": [2], "kwargs": {"scale": 3}, "expected": 6}]}),
    ("enumerate pairs", "def f(s):\n    return list(enumerate(s))\n", call([(["ab"], [[0, "a"], [1, "b"]])])),
    ("heapq.nsmallest", "import heapq\ndef f(xs, k):\n    return heapq.nsmallest(k, xs)\n", call([([[5, 1, 4], 2], [1, 4])])),
    ("itertools.accumulate", "import itertools\ndef f(xs):\n    return list(itertools.accumulate(xs))\n",
     call([([[1, 2, 3]], [1, 3, 6])])),
    ("statistics.mean", "import statistics\ndef f(xs):\n    return statistics.mean(xs)\n", call([([[1, 2, 3, 4]], 2.5)])),
    ("math.comb", "import math\ndef f(n, k):\n    return math.comb(n, k)\n", call([([60, 30], math.comb(60, 30))])),
    ("list of Counters", "from collections import Counter\ndef f(words):\n    return [Counter(w) for w in words]\n",
     call([([["ab", "aa"]], [{"a": 1, "b": 1}, {"a": 2}])])),
    # assert tests: the checker's own code compares, with Python's ==
    ("Counter == dict in an assert", "from collections import Counter\ndef f(s):\n    return Counter(s.split())\n",
     check("assert candidate('a b a') == {'a': 2, 'b': 1}")),
    ("the test calls Counter.most_common", "from collections import Counter\ndef f(s):\n    return Counter(s)\n",
     check("assert candidate('abca').most_common(1) == [('a', 2)]")),
    ("namedtuple fields in an assert", "from collections import namedtuple\nP = namedtuple('P', 'x y')\n"
     "def f(a, b):\n    return P(a, b)\n", check("r = candidate(1, 2)", "assert r.x == 1 and r.y == 2 and r == (1, 2)")),
    ("OrderedDict order in an assert", "from collections import OrderedDict\ndef f():\n    d = OrderedDict(a=1, b=2)\n"
     "    d.move_to_end('a')\n    return d\n",
     check("assert candidate() == OrderedDict([('b', 2), ('a', 1)])", prefix="from collections import OrderedDict\n")),
    ("Fraction in an assert", "from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b)\n",
     check("assert candidate(2, 6) == Fraction(1, 3)", "assert candidate(1, 2) == 0.5",
           prefix="from fractions import Fraction\n")),
    ("Decimal in an assert", "from decimal import Decimal\ndef f(s):\n    return Decimal(s) * 2\n",
     check("assert candidate('1.1') == Decimal('2.2')", prefix="from decimal import Decimal\n")),
    ("set and frozenset", "def f(xs):\n    return set(xs), frozenset(xs)\n",
     check("assert candidate([1, 2, 2]) == ({1, 2}, {1, 2})")),
    ("bytes", "def f(s):\n    return s.encode()\n", check("assert candidate('ab') == b'ab'")),
    ("a huge int in an assert", "import math\ndef f(n):\n    return math.factorial(n)\n",
     check("assert candidate(2000) == math.factorial(2000)", prefix="import math\n")),
    ("deque in an assert", "from collections import deque\ndef f():\n    return deque([1, 2])\n",
     check("assert candidate() == deque([1, 2])", prefix="from collections import deque\n")),
    ("math.isclose on a float", "def f(x):\n    return x ** 0.5\n",
     check("assert math.isclose(candidate(2.0), 2 ** 0.5)", prefix="import math\n")),
    ("all() over a generator", "def f(x):\n    return 2 * x\n", check("assert all(candidate(x) == 2 * x for x in range(5))")),
    ("raises ValueError as the test expects", "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n",
     check(RAISES.format(arg=-1, exc="ValueError"), "assert candidate(1) == 1")),
    ("raises its own ValueError subclass", "class NegativeError(ValueError):\n    pass\n"
     "def f(x):\n    if x < 0:\n        raise NegativeError(x)\n    return x\n", check(RAISES.format(arg=-1, exc="ValueError"))),
    ("raises KeyError from a lookup", "def f(k):\n    return {'a': 1}[k]\n", check(RAISES.format(arg="'b'", exc="KeyError"))),
    ("raises ZeroDivisionError", "def f(x):\n    return 1 / x\n", check(RAISES.format(arg=0, exc="ZeroDivisionError"))),
    ("raises TypeError", "def f(x):\n    return x + 1\n", check(RAISES.format(arg="'a'", exc="TypeError"))),
    ("raises AssertionError from its own assert", "def f(x):\n    assert x >= 0\n    return x\n",
     check(RAISES.format(arg=-1, exc="AssertionError"))),
    ("raises IndexError", "def f(xs):\n    return xs[5]\n", check(RAISES.format(arg="[]", exc="IndexError"))),
    # stdio tests: tokens compared on the host
    ("print with several arguments", "a, b = map(int, input().split())\nprint(a, b, a + b)\n", stdio(("1 2\n", "1 2 3\n"))),
    ("sys.stdout.write without a newline", "import sys\nsys.stdout.write(str(sum(map(int, sys.stdin.read().split()))))\n",
     stdio(("1 2 3\n", "6\n"))),
    ("print(*list)", "xs = sorted(map(int, input().split()))\nprint(*xs)\n", stdio(("3 1 2\n", "1 2 3\n"))),
    ("one per line with join", "n = int(input())\nprint('\\n'.join(str(i * i) for i in range(n)))\n",
     stdio(("3\n", "0\n1\n4\n"))),
    ("a formatted float within float_tol", "print(f'{1 / int(input()):.6f}')\n", stdio(("3\n", "0.333333333\n"), float_tol=1e-6)),
    ("an integral float for an int expected", "print(int(input()) / 2)\n", stdio(("6\n", "3\n"), float_tol=1e-6)),
    ("end='' and trailing spaces", "for w in input().split():\n    print(w, end='  ')\n", stdio(("a b\n", "a b\n"))),
    ("print a bool", "print(int(input()) > 0)\n", stdio(("5\n", "True\n"))),
    ("catch an exception and print", "try:\n    print(1 // int(input()))\nexcept ZeroDivisionError:\n    print('undefined')\n",
     stdio(("0\n", "undefined\n"), ("2\n", "0\n"))),
    ("print a Fraction", "from fractions import Fraction\nprint(Fraction(*map(int, input().split())))\n",
     stdio(("2 4\n", "1/2\n"))),
    ("print a Decimal", "from decimal import Decimal\nprint(sum(map(Decimal, input().split())))\n",
     stdio(("0.1 0.2\n", "0.3\n"))),
    # generators, complex numbers, ranges, dates and scratch files (issue 50, class 7)
    ("a generator read with list()", "def f(n):\n    for i in range(n):\n        yield i * i\n",
     check("assert list(candidate(4)) == [0, 1, 4, 9]", "assert sum(candidate(3)) == 5")),
    ("next() over a returned generator", "def f():\n    a, b = 0, 1\n    while True:\n        yield a\n"
     "        a, b = b, a + b\n", check("g = candidate()", "assert [next(g) for _ in range(6)] == [0, 1, 1, 2, 3, 5]")),
    ("an endless generator read with islice", "import itertools\ndef f(step):\n    return itertools.count(0, step)\n",
     check("assert list(itertools.islice(candidate(3), 4)) == [0, 3, 6, 9]", prefix="import itertools\n")),
    ("a generator for a list expected", "def f(xs):\n    return (x for x in xs if x % 2)\n", call([([[1, 2, 3]], [1, 3])])),
    ("map() returned for a list expected", "def f(xs):\n    return map(str, xs)\n", call([([[1, 2]], ["1", "2"])])),
    ("a generator expression in a for loop", "def f(s):\n    return (c.upper() for c in s)\n",
     check("out = ''", "for c in candidate('ab'):\n        out += c", "assert out == 'AB'")),
    ("a complex root (cmath)", "import cmath\ndef f(x):\n    return cmath.sqrt(x)\n",
     check("assert candidate(-4) == 2j", "assert candidate(4) == 2")),
    ("abs() of a complex result", "def f(a, b):\n    return complex(a, b)\n",
     check("assert abs(candidate(3, 4)) == 5", "assert candidate(1, -1).conjugate() == 1 + 1j")),
    ("a range compared with a range", "def f(n):\n    return range(0, n, 2)\n",
     check("assert candidate(7) == range(0, 7, 2)", "assert len(candidate(10)) == 5 and candidate(10)[1] == 2")),
    ("a range for a list expected", "def f(n):\n    return range(n)\n", call([([3], [0, 1, 2])])),
    ("a datetime.date argument", "import datetime\ndef f(d):\n    return d + datetime.timedelta(days=1)\n",
     check("assert candidate(datetime.date(2024, 2, 28)) == datetime.date(2024, 2, 29)",
           "assert candidate(datetime.date(2023, 12, 31)).year == 2024", prefix="import datetime\n")),
    ("a weekday from a date", "def f(d):\n    return d.strftime('%A')\n",
     check("assert candidate(date(2024, 1, 1)) == 'Monday'", prefix="from datetime import date\n")),
    ("a timedelta between two dates", "def f(a, b):\n    return b - a\n",
     check("assert candidate(date(2024, 1, 1), date(2024, 3, 1)).days == 60", prefix="from datetime import date\n")),
    ("a datetime moved to UTC", "from datetime import timezone\ndef f(t):\n    return t.astimezone(timezone.utc)\n",
     check("t = datetime(2024, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))",
           "assert candidate(t) == datetime(2024, 1, 1, 10, tzinfo=timezone.utc)",
           "assert candidate(t).tzinfo == timezone.utc", prefix="from datetime import datetime, timedelta, timezone\n")),
    ("a datetime.time parsed", "import datetime\ndef f(s):\n    h, m = map(int, s.split(':'))\n"
     "    return datetime.time(h, m)\n", check("assert candidate('07:45') == datetime.time(7, 45)", prefix="import datetime\n")),
    ("a scratch tempfile.TemporaryFile", "import tempfile\ndef f(lines):\n    with tempfile.TemporaryFile('w+') as t:\n"
     "        t.write('\\n'.join(lines))\n        t.seek(0)\n        return t.read().splitlines()\n",
     check("assert candidate(['a', 'b']) == ['a', 'b']")),
    ("a NamedTemporaryFile written and reopened", "import tempfile\ndef f(s):\n"
     "    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as t:\n        t.write(s)\n"
     "    with open(t.name) as r:\n        return r.read()\n", check("assert candidate('xyz') == 'xyz'")),
    ("a TemporaryDirectory with files listed", "import os, tempfile\ndef f(names):\n"
     "    with tempfile.TemporaryDirectory() as d:\n        for n in names:\n"
     "            open(os.path.join(d, n), 'w').close()\n        return sorted(os.listdir(d))\n",
     call([([["b", "a"]], ["a", "b"])])),
    ("a file written in the working directory and read back", "def f(s):\n    with open('out.txt', 'w') as w:\n"
     "        w.write(s)\n    with open('out.txt') as r:\n        return r.read()[::-1]\n", check("assert candidate('ab') == 'ba'")),
]

NUMPY: list[tuple[str, str, dict]] = [
    ("np.int64", "import numpy as np\ndef f(xs):\n    return np.sum(np.array(xs))\n", call([([[1, 2, 3]], 6)])),
    ("np.float64", "import numpy as np\ndef f(xs):\n    return np.mean(xs)\n", call([([[1, 2]], 1.5)])),
    ("np.bool_", "import numpy as np\ndef f(xs):\n    return np.all(np.array(xs) > 0)\n", call([([[1, 2]], True)])),
    ("np.ndarray", "import numpy as np\ndef f(n):\n    return np.arange(n) * 2\n", call([([3], [0, 2, 4])])),
    ("numpy scalars in an assert", "import numpy as np\ndef f(xs):\n    return np.max(xs), np.float32(0.5), np.bool_(True)\n",
     check("assert candidate([1, 5]) == (5, 0.5, True)")),
    # tests that import numpy themselves, and arrays whose shape and dtype the test reads (issue 50, class 7)
    ("the test imports numpy: np.array_equal", "def f(xs):\n    return sorted(xs)\n",
     check("assert np.array_equal(candidate([3, 1, 2]), np.array([1, 2, 3]))", prefix="import numpy as np\n")),
    ("the test compares with np.allclose", "def f(n):\n    return [1 / (i + 1) for i in range(n)]\n",
     check("assert np.allclose(candidate(3), [1, 0.5, 1 / 3])", prefix="import numpy as np\n")),
    ("an ndarray whose .shape the test reads", "import numpy as np\ndef f(n, m):\n    return np.zeros((n, m))\n",
     check("assert candidate(2, 3).shape == (2, 3)", "assert candidate(2, 3).sum() == 0")),
    ("an ndarray's dtype and ndim", "import numpy as np\ndef f(n):\n    return np.arange(n, dtype=np.int32).reshape(1, n)\n",
     check("a = candidate(4)", "assert a.dtype == np.int32 and a.ndim == 2 and a[0, 3] == 3", prefix="import numpy as np\n")),
    ("np.eye for a nested list expected", "import numpy as np\ndef f(n):\n    return np.eye(n)\n",
     call([([2], [[1.0, 0.0], [0.0, 1.0]])])),
    ("np.testing on a matrix product", "import numpy as np\ndef f(a, b):\n    return np.array(a) @ np.array(b)\n",
     check("np.testing.assert_allclose(candidate([[1, 2]], [[3], [4]]), [[11]])", prefix="import numpy as np\n")),
    ("an ndarray as the test's argument", "def f(x):\n    return int(x.sum()), x.shape\n",
     check("assert candidate(np.arange(6).reshape(2, 3)) == (15, (2, 3))", prefix="import numpy as np\n")),
    ("a complex array from np.fft", "import numpy as np\ndef f(xs):\n    return np.fft.fft(xs)\n",
     check("assert np.allclose(candidate([1, 0, 0, 0]), np.ones(4))", prefix="import numpy as np\n")),
    ("a boolean mask array", "import numpy as np\ndef f(xs):\n    return np.array(xs) > 1\n",
     check("m = candidate([1, 2, 3])", "assert m.dtype == bool and m.tolist() == [False, True, True]")),
    ("a 0-d array", "import numpy as np\ndef f(x):\n    return np.array(x * 2.0)\n",
     check("assert candidate(2) == 4.0 and candidate(2).ndim == 0")),
]


PD = "import pandas as pd\n"
PANDAS: list[tuple[str, str, dict]] = [
    ("pandas groupby sum to a dict", PD + "def f(keys, values):\n"
     "    return pd.DataFrame({'k': keys, 'v': values}).groupby('k')['v'].sum().to_dict()\n",
     call([([["a", "b", "a"], [1, 2, 3]], {"a": 4, "b": 2})])),
    ("pandas groupby mean of several columns", PD + "def f(rows):\n    df = pd.DataFrame(rows, columns=['g', 'x', 'y'])\n"
     "    return df.groupby('g').mean().round(2).values.tolist()\n",
     check("assert candidate([['a', 1, 2], ['a', 2, 3], ['b', 5, 5]]) == [[1.5, 2.5], [5.0, 5.0]]")),
    ("a Series' values compared with Series.equals by the test", PD + "def f(xs):\n    return pd.Series(xs).cumsum().tolist()\n",
     check("assert pd.Series(candidate([1, 2, 3])).equals(pd.Series([1, 3, 6]))", prefix=PD)),
    ("records compared as a DataFrame by the test", PD + "def f(names, ages):\n"
     "    df = pd.DataFrame({'name': names, 'age': ages}).sort_values('age')\n    return df.to_dict('records')\n",
     check("got = pd.DataFrame(candidate(['b', 'a'], [40, 30]))",
           "assert got.equals(pd.DataFrame({'name': ['a', 'b'], 'age': [30, 40]}))", prefix=PD)),
    ("pd.Timestamp month end as a date", PD + "def f(s):\n    return (pd.Timestamp(s) + pd.offsets.MonthEnd(0)).date()\n",
     check("assert candidate('2024-02-10') == date(2024, 2, 29)",
           "assert pd.Timestamp(candidate('2023-12-01')) == pd.Timestamp('2023-12-31')",
           prefix="from datetime import date\n" + PD)),
    ("pd.to_datetime day names and a date range", PD + "def f(days):\n"
     "    return pd.to_datetime(days).day_name().tolist(), len(pd.date_range(days[0], days[-1], freq='D'))\n",
     call([([["2024-01-01", "2024-01-03"]], [["Monday", "Wednesday"], 3])])),
    ("read_csv of a scratch file the solution wrote", PD + "def f(text):\n    with open('data.csv', 'w') as w:\n"
     "        w.write(text)\n    df = pd.read_csv('data.csv')\n    return float(df['x'].mean()), list(df.columns)\n",
     call([(["x,y\n1,a\n3,b\n"], [2.0, ["x", "y"]])])),
    ("read_csv of a NamedTemporaryFile", PD + "import tempfile\ndef f(rows):\n"
     "    with tempfile.NamedTemporaryFile('w', suffix='.csv', delete=False) as t:\n"
     "        pd.DataFrame(rows, columns=['a', 'b']).to_csv(t.name, index=False)\n"
     "    return pd.read_csv(t.name)['b'].sum()\n", call([([[[1, 2], [3, 4]]], 6)])),
    ("NaN filled and counted", PD + "def f(xs):\n    s = pd.Series(xs, dtype=float)\n"
     "    return int(s.isna().sum()), s.fillna(s.mean()).tolist()\n",
     call([([[1, None, 3]], [1, [1.0, 2.0, 3.0]])])),
    ("a NaN returned and read with math.isnan", PD + "def f(xs):\n    return pd.Series(xs, dtype=float).rolling(2).mean().tolist()\n",
     check("r = candidate([1, 2, 4])", "assert math.isnan(r[0]) and r[1:] == [1.5, 3.0]", prefix="import math\n")),
    ("dropna then describe", PD + "def f(xs):\n    d = pd.Series(xs).dropna().describe()\n"
     "    return {k: float(d[k]) for k in ('count', 'mean', 'max')}\n",
     call([([[2, None, 4]], {"count": 2.0, "mean": 3.0, "max": 4.0})])),
    ("a pivot_table as nested lists", PD + "def f(rows):\n    df = pd.DataFrame(rows, columns=['r', 'c', 'v'])\n"
     "    p = df.pivot_table(index='r', columns='c', values='v', aggfunc='sum', fill_value=0)\n"
     "    return list(p.index), list(p.columns), p.values.tolist()\n",
     call([([[["x", "p", 1], ["x", "q", 2], ["y", "p", 3], ["x", "p", 4]]], [["x", "y"], ["p", "q"], [[5, 2], [3, 0]]])])),
    ("a pivot's ndarray whose shape the test reads", PD + "def f(rows):\n"
     "    return pd.DataFrame(rows, columns=['r', 'c', 'v']).pivot(index='r', columns='c', values='v').to_numpy()\n",
     check("a = candidate([['x', 'p', 1], ['x', 'q', 2], ['y', 'p', 3], ['y', 'q', 4]])",
           "assert a.shape == (2, 2) and a.tolist() == [[1, 2], [3, 4]]")),
    ("merge of two tables", PD + "def f(left, right):\n    a = pd.DataFrame(left, columns=['id', 'x'])\n"
     "    b = pd.DataFrame(right, columns=['id', 'y'])\n    return a.merge(b, on='id').values.tolist()\n",
     call([([[[1, "a"], [2, "b"]], [[2, "B"], [3, "C"]]], [[2, "b", "B"]])])),
    ("value_counts as a dict", PD + "def f(words):\n    return pd.Series(words).value_counts().to_dict()\n",
     call([([["a", "b", "a"]], {"a": 2, "b": 1})])),
]

@pytest.fixture(scope="module", params=["docker", "local"])
def judged(request):
    """`(backend, {row name: result}, {library: importable})` for the whole table, scored in one batch per backend."""
    results, probed = judge_rows(request.param, HONEST + NUMPY + PANDAS,
                                 {lib: (f"import {lib}\n", stdio(("", ""))) for lib in ("numpy", "pandas")})
    yield request.param, results, {lib: result.status is Status.CORRECT for lib, result in probed.items()}

def test_the_table_is_large_and_its_names_distinct():
    names = [name for name, _c, _t in HONEST + NUMPY + PANDAS]
    assert len(HONEST) >= 40 and len(PANDAS) >= 6 and len(names) >= 110 and len(set(names)) == len(names)


@pytest.mark.parametrize("name", [row[0] for row in HONEST])
def test_honest_solution_is_correct_with_no_hack_flag(judged, name):
    backend, results, _ok = judged
    result = results[name]
    assert result.status is Status.CORRECT and result.reward == 1.0, (backend, result.details)
    assert "hacks" not in result.details


@pytest.mark.parametrize("name", [row[0] for row in NUMPY])
def test_numpy_return_values_are_correct_with_no_hack_flag(judged, name):
    backend, results, ok = judged
    assert ok["numpy"], f"the {backend} sandbox's Python has no numpy: run `make docker` (it installs python3-numpy)"
    result = results[name]
    assert result.status is Status.CORRECT and result.reward == 1.0, (backend, result.details)
    assert "hacks" not in result.details


@pytest.mark.parametrize("name", [row[0] for row in PANDAS])
def test_pandas_solutions_and_tests_are_correct_with_no_hack_flag(judged, name):
    backend, results, ok = judged
    assert ok["pandas"], f"the {backend} sandbox's Python has no pandas: run `make docker` (it installs python3-pandas)"
    result = results[name]
    assert result.status is Status.CORRECT and result.reward == 1.0, (backend, result.details)
    assert "hacks" not in result.details
