"""TimeLimitPool: order, hard per-item limits from the parent, failures kept to their item, threads.

Test functions come from the standard library: workers import callables by name, and test
modules (imported by path) are not importable there."""

import math
import os
import threading
import time

import pytest

from rlvr.verifiers.pool import TimeLimitPool


@pytest.fixture(scope="module")
def pool():
    with TimeLimitPool(2) as p:
        yield p


def test_results_in_input_order(pool):
    outcomes = pool.map(math.sqrt, [(float(i * i),) for i in range(50)], timeout=30)
    assert [o.status for o in outcomes] == ["ok"] * 50
    assert [o.value for o in outcomes] == [float(i) for i in range(50)]


def test_overrunning_item_is_killed_and_others_unaffected(pool):
    items = [(0.0,), (3600.0,), (0.0,), (0.0,)]
    outcomes = pool.map(time.sleep, items, timeout=1.0)
    assert [o.status for o in outcomes] == ["ok", "timeout", "ok", "ok"]
    after = pool.map(math.sqrt, [(4.0,)], timeout=30)  # the replacement worker serves the next batch
    assert after[0].value == 2.0


def test_exception_is_that_items_error(pool):
    outcomes = pool.map(math.sqrt, [(-1.0,), (9.0,)], timeout=30)
    assert outcomes[0].status == "error" and "ValueError" in outcomes[0].error
    assert outcomes[1].value == 3.0


def test_dead_worker_is_replaced(pool):
    outcomes = pool.map(os._exit, [(3,)], timeout=30)
    assert outcomes[0].status == "error" and "exit code 3" in outcomes[0].error
    assert pool.map(math.sqrt, [(16.0,)], timeout=30)[0].value == 4.0


def test_function_by_name_and_unimportable_function():
    with TimeLimitPool(1) as p:
        assert p.map("math:factorial", [(5,)], timeout=30)[0].value == 120
        bad = p.map("no_such_module_xyz:f", [(1,)], timeout=30)[0]
        assert bad.status == "error" and "ModuleNotFoundError" in bad.error


def test_progress_counts_every_item(pool):
    seen = []
    pool.map(math.sqrt, [(1.0,)] * 7, timeout=30, progress=seen.append)
    assert sum(seen) == 7


def test_usable_from_threads(pool):
    results = {}

    def run(k):
        results[k] = [o.value for o in pool.map(math.sqrt, [(float(k * k),)] * 5, timeout=30)]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [float(k)] * 5 for k in range(4)}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        TimeLimitPool(0)
    with TimeLimitPool(1) as p, pytest.raises(ValueError):
        p.map(math.sqrt, [(1.0,)], timeout=0)
