"""WarmPool with stand-in containers: reuse, replacement of dirty ones, and never more than `size`.

The Docker tests (test_sandbox_docker.py) check the same pool against real containers; these
pin the bookkeeping, including the race a real engine only shows now and then: a checkout that
arrives while the replacement for a dirty container is still starting.
"""

from __future__ import annotations

import threading

import pytest

from rlvr.sandboxes.pool import WarmPool

pytestmark = pytest.mark.xdist_group("sandbox")  # one xdist worker: containers, uid 65534 are machine-wide


class FakeBox:
    def __init__(self, registry: "Registry", key):
        self.registry, self.key, self.dirty = registry, key, False

    def destroy(self) -> None:
        with self.registry.lock:
            self.registry.alive.discard(self)


class Registry:
    """Creates FakeBoxes; `gate` (when set) holds creation until the test opens it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.alive: set[FakeBox] = set()
        self.created = 0
        self.gate: threading.Event | None = None
        self.failures = 0  # how many of the next creations fail

    def create(self, key) -> FakeBox:
        if self.gate is not None:
            assert self.gate.wait(timeout=30)
        with self.lock:
            failing, self.failures = self.failures > 0, max(0, self.failures - 1)
        if failing:
            raise OSError("engine said no")
        box = FakeBox(self, key)
        with self.lock:
            self.alive.add(box)
            self.created += 1
        return box


@pytest.fixture
def registry():
    return Registry()


def test_clean_runs_reuse_one_container(registry):
    pool = WarmPool(registry.create, size=1)
    seen = set()
    for _ in range(3):
        with pool.container("k") as box:
            seen.add(box)
    assert len(seen) == 1 and registry.created == 1
    pool.close()
    assert not registry.alive


def test_checkout_during_refill_waits_for_it_instead_of_starting_another(registry):
    pool = WarmPool(registry.create, size=1)
    _checkout(pool)  # one container, now idle
    registry.gate = threading.Event()  # from here on, creating a container blocks until the gate opens
    with pool.container("k") as box:
        box.dirty = True  # removed on return; its replacement starts and is held at the gate
    got = []
    checkout = threading.Thread(target=lambda: got.append(_checkout(pool)))
    checkout.start()
    checkout.join(timeout=0.2)  # let it arrive while the refill is held (it waits; the test holds either way)
    registry.gate.set()
    checkout.join(timeout=30)
    assert got and got[0] in registry.alive
    assert registry.created == 2, "the checkout started its own container besides the refill"
    assert len(registry.alive) == 1
    pool.close()
    assert not registry.alive


def _checkout(pool: WarmPool) -> FakeBox:
    with pool.container("k") as box:
        return box


def test_failed_refill_lets_the_checkout_start_its_own(registry):
    pool = WarmPool(registry.create, size=1)
    _checkout(pool)
    registry.failures = 1
    with pool.container("k") as box:
        box.dirty = True  # its refill fails
    box = _checkout(pool)  # waits for that refill if still in flight, then starts its own
    assert box in registry.alive and registry.created == 2
    pool.close()
    assert not registry.alive


def test_closed_pool_refuses_checkouts(registry):
    pool = WarmPool(registry.create, size=1)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        _checkout(pool)
