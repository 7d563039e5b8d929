"""A lock granted in arrival order.

`threading.Lock` is not fair: a thread that releases it and asks again at once
usually wins, so a request scoring many batches would keep the model until it
is done. Granting the model batch by batch in arrival order lets concurrent
requests interleave, and a short one finishes early instead of timing out
behind a long one.
"""

from __future__ import annotations

import threading
from collections import deque


class FifoLock:
    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._waiting: deque[object] = deque()
        self._held = False

    def acquire(self, timeout: float | None = None) -> bool:
        """Wait for our turn (at most `timeout` seconds); False if it never came."""
        ticket = object()
        with self._changed:
            self._waiting.append(ticket)
            granted = self._changed.wait_for(
                lambda: not self._held and self._waiting[0] is ticket, timeout
            )
            if not granted:
                self._waiting.remove(ticket)
                self._changed.notify_all()  # the next in line may be free to go now
                return False
            self._waiting.popleft()
            self._held = True
            return True

    def release(self) -> None:
        with self._changed:
            if not self._held:
                raise RuntimeError("release of an unheld FifoLock")
            self._held = False
            self._changed.notify_all()

    def __enter__(self) -> FifoLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
