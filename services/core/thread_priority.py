"""Index work behind queries on shared cores: a lower CPU priority (a higher
nice value) for the threads that do it.

In one process (the embedded stack) or on one machine, an ingest and the
questions asked meanwhile want the same few cores. Queries are short and
someone waits for each; an ingest is long and nobody waits for a given
chunk. So the threads of index work (an Indexer run's thread, the document
encoder's compute threads) run at a higher nice value: while both want a
core the scheduler gives queries most of it; when nothing else runs, index
work gets the whole machine as before (nice only weighs contention).

Linux keeps a nice value per thread and a new thread starts with its
creator's, so a compute pool built from a lowered thread is lowered too
(`built_at_lower_priority`). Lowering needs no privilege; raising back
would, hence a thread of its own for the build. Elsewhere (no per-thread
nice) these calls do nothing and say so.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from services.core.logging import get_logger

T = TypeVar("T")
MAX_NICE = 19
log = get_logger(__name__)


def per_thread_nice() -> bool:
    """Whether setpriority on a thread id lowers that thread alone (Linux)."""
    return sys.platform.startswith("linux") and hasattr(os, "setpriority")


def lower_this_thread(nice: int) -> int:
    """Raise the calling thread's nice value to `nice` (never lower it: a
    thread cannot take back priority it gave up); the value it runs at, or
    0 when nothing was asked (`nice` 0) or the system has no per-thread nice."""
    if nice <= 0 or not per_thread_nice():
        return 0
    thread_id = threading.get_native_id()
    current = os.getpriority(os.PRIO_PROCESS, thread_id)
    if current >= nice:
        return current
    try:
        os.setpriority(os.PRIO_PROCESS, thread_id, min(nice, MAX_NICE))
    except OSError as exc:  # a sandbox that forbids it: run as before
        log.warning("thread_priority_unchanged", nice=nice, error=str(exc))
        return current
    return os.getpriority(os.PRIO_PROCESS, thread_id)


def built_at_lower_priority(build: Callable[[], T], nice: int) -> T:
    """`build()` in a short-lived thread lowered to `nice`, so the threads it
    starts (an ONNX Runtime session's compute pool) keep that priority; its
    result or its exception. `nice` 0: called here, as it is."""
    if nice <= 0 or not per_thread_nice():
        return build()
    outcome: dict[str, T] = {}
    failure: list[BaseException] = []

    def target() -> None:
        lower_this_thread(nice)
        try:
            outcome["value"] = build()
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    builder = threading.Thread(target=target, name="lower-priority-build")
    builder.start()
    builder.join()
    if failure:
        raise failure[0]
    return outcome["value"]


def thread_nice(thread_id: int) -> int:
    """A thread's nice value (tests and logs)."""
    return os.getpriority(os.PRIO_PROCESS, thread_id)
