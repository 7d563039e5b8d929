"""FifoLock: granted in arrival order; a timed-out waiter leaves the queue."""

from __future__ import annotations

import threading
import time

import pytest

from services.reranker.fifo_lock import FifoLock

pytestmark = pytest.mark.unit


def wait_until_queued(lock: FifoLock, count: int) -> None:
    # Reads the private queue so the test orders threads without sleeping on guesses.
    deadline = time.monotonic() + 10
    while len(lock._waiting) < count:
        assert time.monotonic() < deadline, "waiter never queued"
        time.sleep(0.001)


def test_waiters_get_the_lock_in_arrival_order() -> None:
    lock = FifoLock()
    order: list[int] = []
    lock.acquire()

    def take(n: int) -> None:
        with lock:
            order.append(n)

    threads = []
    for n in range(5):
        thread = threading.Thread(target=take, args=(n,))
        thread.start()
        wait_until_queued(lock, n + 1)
        threads.append(thread)
    lock.release()
    for thread in threads:
        thread.join(timeout=10)
    assert order == [0, 1, 2, 3, 4]


def test_a_releasing_thread_asking_again_goes_to_the_back() -> None:
    lock = FifoLock()
    order: list[str] = []
    lock.acquire()

    def take() -> None:
        with lock:
            order.append("other")

    other = threading.Thread(target=take)
    other.start()
    wait_until_queued(lock, 1)
    lock.release()
    lock.acquire()  # re-asking at once must not jump the queue
    order.append("again")
    lock.release()
    other.join(timeout=10)
    assert order == ["other", "again"]


def test_timed_out_waiter_gives_up_and_leaves_the_queue() -> None:
    lock = FifoLock()
    lock.acquire()
    assert lock.acquire(timeout=0.01) is False
    lock.release()
    assert lock.acquire(timeout=1) is True  # nobody stale ahead of us
    lock.release()


def test_releasing_an_unheld_lock_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        FifoLock().release()
