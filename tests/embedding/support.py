"""Waiting for the embedding's worker threads to reach a state, in tests."""

from __future__ import annotations

import threading
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    event = threading.Event()
    for _ in range(int(timeout_s * 100)):
        if condition():
            return
        event.wait(0.01)
    raise AssertionError("condition not reached")
